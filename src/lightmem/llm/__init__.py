"""Generative model clients: one public ``complete_json`` (validation, retries, repair,
accounting), one private ``_chat`` per provider."""

from lightmem.llm.base import ChatReply, LLMClient, TransientLLMError
from lightmem.llm.openai_compat import OpenAIChatClient

__all__ = ["ChatReply", "LLMClient", "OpenAIChatClient", "TransientLLMError"]
