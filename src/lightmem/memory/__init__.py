"""The LightMemory facade; ``lightmem.memory.lightmem`` is the published import path."""

from lightmem.memory.lightmem import LightMemory

__all__ = ["LightMemory"]
