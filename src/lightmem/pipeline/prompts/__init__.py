"""One module per prompt. Each has ``VERSION``, builds its messages with user text fenced as
data, and parses the reply strictly (raising ``InvalidReply`` for a repair round)."""

__all__ = []
