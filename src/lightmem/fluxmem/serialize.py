"""Stage I context as the three tagged blocks; every piece of memory text is escaped."""

from __future__ import annotations

from html import escape

from lightmem.fluxmem.types import Subgraph


def serialize(sub: Subgraph) -> str:
    """Memory content is data: ``<``, ``>``, ``&`` and quotes are escaped, so stored text
    cannot close a block, open a fake one or inject attributes."""
    out = ["<semantic_memory>"]
    for s in sub.semantic:
        src = escape(str(s.node.data.get("source", "")), quote=True)
        out.append(
            f'  <fact id="{s.node.id}" score="{s.score:.3f}" source="{src}">'
            f"{escape(s.node.text, quote=True)}</fact>"
        )
    out.append("</semantic_memory>")
    out.append("<episodic_memory>")
    for s in sub.episodic:
        d = s.node.data
        steps = "; ".join(str(x) for x in d.get("trajectory", []))
        out.append(
            f'  <episode id="{s.node.id}" success="{str(bool(d.get("success"))).lower()}" '
            f'similarity="{s.score:.3f}">task: {escape(str(d.get("task", "")), quote=True)}'
            f"{' | steps: ' + escape(steps, quote=True) if steps else ''}</episode>"
        )
    out.append("</episodic_memory>")
    out.append("<procedural_memory>")
    for s in sub.procedural:
        skill_steps = s.node.steps
        body = " ".join(f"{i}. {escape(t, quote=True)}" for i, t in enumerate(skill_steps, 1))
        out.append(
            f'  <skill id="{s.node.id}" version="{s.node.version}">{body or escape(s.node.text)}'
            "</skill>"
        )
    out.append("</procedural_memory>")
    return "\n".join(out)
