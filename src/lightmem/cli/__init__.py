"""The ``lightmem`` command line."""

__all__ = []
