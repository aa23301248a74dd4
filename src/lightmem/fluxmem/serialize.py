"""Stage I context as the three tagged blocks; every piece of memory text is escaped."""

from __future__ import annotations

from html import escape as _html_escape

from lightmem.fluxmem.types import Subgraph
from lightmem.sanitize import inline

__all__ = ["serialize"]


def _text(text: str, quote: bool = True) -> str:
    """One line of escaped text: no stored text can start a line of the context."""
    return _html_escape(inline(text), quote=quote)


def serialize(sub: Subgraph) -> str:
    """Memory content is data: ``<``, ``>``, ``&`` and quotes are escaped and line breaks
    flattened, so stored text cannot close a block, open a fake one, inject attributes or
    start a line of its own."""
    out = ["<semantic_memory>"]
    for s in sub.semantic:
        src = _text(str(s.node.data.get("source", "")), quote=True)
        out.append(
            f'  <fact id="{_text(s.node.id)}" score="{s.score:.3f}" source="{src}">'
            f"{_text(s.node.text, quote=True)}</fact>"
        )
    out.append("</semantic_memory>")
    out.append("<episodic_memory>")
    for s in sub.episodic:
        d = s.node.data
        steps = "; ".join(str(x) for x in d.get("trajectory", []))
        out.append(
            f'  <episode id="{_text(s.node.id)}" success="{str(bool(d.get("success"))).lower()}" '
            f'similarity="{s.score:.3f}">task: {_text(str(d.get("task", "")), quote=True)}'
            f"{' | steps: ' + _text(steps, quote=True) if steps else ''}</episode>"
        )
    out.append("</episodic_memory>")
    out.append("<procedural_memory>")
    for s in sub.procedural:
        skill_steps = s.node.steps
        body = " ".join(f"{i}. {_text(t, quote=True)}" for i, t in enumerate(skill_steps, 1))
        head = f'  <skill id="{_text(s.node.id)}" version="{s.node.version}">'
        out.append(f"{head}{body or _text(s.node.text)}</skill>")
    out.append("</procedural_memory>")
    return "\n".join(out)
