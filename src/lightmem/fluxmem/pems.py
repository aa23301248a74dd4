"""PEMS: the procedural-memory score Stage III optimises.

PEMS = eta / (|V_proc| * ln l) * (1 - delta), where eta is the mean success of the skill's
source episodes (or of replays), |V_proc| the number of procedural nodes, l the skill's
length in tokens and delta = 1 - cosine(previous version, this version).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from lightmem.text import estimate_tokens

__all__ = ["pems"]


def pems(
    eta: float,
    n_procedural: int,
    skill_text: str,
    previous: npt.NDArray[np.float32] | None,
    current: npt.NDArray[np.float32],
) -> float:
    length = max(2, estimate_tokens(skill_text))  # ln(1) = 0 would divide by zero
    delta = 0.0 if previous is None else 1.0 - float(np.clip(previous @ current, -1.0, 1.0))
    return eta / (max(1, n_procedural) * math.log(length)) * (1.0 - delta)
