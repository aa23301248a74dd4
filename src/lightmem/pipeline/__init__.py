"""The LightMem pipeline stages, each a small module with pure logic where possible."""

__all__ = []
