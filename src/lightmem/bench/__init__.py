"""Benchmarks run by hand (``lightmem bench ...``); they print and write JSON."""

__all__ = []
