"""``import fluxmem``: the published FluxMem usage, served by :mod:`lightmem.fluxmem`."""

from lightmem.fluxmem import *  # noqa: F403
from lightmem.fluxmem import __all__  # noqa: F401
