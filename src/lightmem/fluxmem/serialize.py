"""Stage I context as the three tagged blocks; every piece of memory text is escaped."""

from __future__ import annotations

from html import escape as _html_escape

from lightmem.fluxmem.types import Subgraph
from lightmem.sanitize import inline

__all__ = ["serialize"]


def _text(text: str, quote: bool = True) -> str:
    """One line of escaped text: no stored text can start a line of the context."""
    return _html_escape(inline(text), quote=quote)


def _steps(steps: object) -> str:
    """Each step its own element: a step's text holding "; " or " 2. " is one step, so a
    stored step cannot forge others."""
    items = steps if isinstance(steps, list | tuple) else []
    return "".join(f"<step>{_text(str(x), quote=True)}</step>" for x in items)


def serialize(sub: Subgraph) -> str:
    """Memory content is data: ``<``, ``>``, ``&`` and quotes are escaped and line breaks
    flattened, so stored text cannot close a block, open a fake one, inject attributes or
    start a line of its own; an episode's task and every step of an episode or a skill are
    elements of their own, so no text can pass for another part."""
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
        out.append(
            f'  <episode id="{_text(s.node.id)}" success="{str(bool(d.get("success"))).lower()}" '
            f'similarity="{s.score:.3f}"><task>{_text(str(d.get("task", "")), quote=True)}'
            f"</task>{_steps(d.get('trajectory', []))}</episode>"
        )
    out.append("</episodic_memory>")
    out.append("<procedural_memory>")
    for s in sub.procedural:
        head = f'  <skill id="{_text(s.node.id)}" version="{s.node.version}">'
        out.append(f"{head}{_steps(list(s.node.steps)) or _text(s.node.text)}</skill>")
    out.append("</procedural_memory>")
    return "\n".join(out)
