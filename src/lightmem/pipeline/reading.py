"""What the update detector reads of one sentence, whatever its language (the English
reader is :mod:`lightmem.pipeline.statements`, the Chinese one
:mod:`lightmem.pipeline.statements_zh`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SELF", "Reading"]

SELF = "\x00self"  # the subject "the speaker"; never a name


@dataclass(frozen=True, slots=True)
class Reading:
    """One sentence as the detector reads it: who it is about, its mood (plan, addition,
    report), whether it marks a change or narrates a past event (see the readers'
    module docstrings)."""

    text: str
    #: ``SELF``, another speaker's lower-cased name, a relative ("my parents") or ""
    subject: str
    irrealis: bool
    additive: bool
    reported: bool
    change: bool
    past_event: bool
    #: what a termination marker says ended ("gave up tennis": tennis)
    ended: tuple[str, ...] = ()
    #: the first word said of each subject mention: the predicates ("I study X": study)
    heads: tuple[str, ...] = ()
    #: the person the speaker names by their relation ("My colleague Ruth moved",
    #: "Hendrik, my cousin, moved": ruth, hendrik): what is said is that person's, while
    #: who the relation is stays the speaker's fact ("Leon, my roommate, cooks")
    named: str = ""
    #: what a correction says was not so ("I meant Gatwick, not Heathrow": heathrow)
    contrast: tuple[str, ...] = ()

    @property
    def asserts(self) -> bool:
        """It asserts something of a tracked subject (not a plan, guess or report)."""
        return bool(self.subject) and not self.irrealis and not self.reported
