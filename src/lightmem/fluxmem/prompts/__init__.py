"""FluxMem's prompts, one module each (verify, attribute, steps), user text fenced as data."""

__all__ = []
