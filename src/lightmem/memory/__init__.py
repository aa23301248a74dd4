"""The LightMemory facade; ``lightmem.memory.lightmem`` is the published import path."""

from lightmem.memory.async_memory import AsyncLightMemory
from lightmem.memory.lightmem import LightMemory

__all__ = ["AsyncLightMemory", "LightMemory"]
