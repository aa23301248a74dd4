"""Public test doubles: use them to test your own agent code against lightmem offline."""

from lightmem.testing.replies import ScriptedLLM
from lightmem.testing.stub_server import OpenAIStubServer

__all__ = ["OpenAIStubServer", "ScriptedLLM"]
