"""Generative model clients: one public ``complete_json`` (validation, retries, repair,
bounded structured outputs, context packing, accounting), one private ``_chat`` per
provider."""

from lightmem.llm.base import ChatReply, LLMClient, TransientLLMError, UnusableOutputError
from lightmem.llm.openai_compat import OpenAIChatClient
from lightmem.llm.schema import OutputSchema

__all__ = [
    "ChatReply",
    "LLMClient",
    "OpenAIChatClient",
    "OutputSchema",
    "TransientLLMError",
    "UnusableOutputError",
]
