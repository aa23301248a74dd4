"""Public test doubles: use them to test your own agent code against lightmem offline."""

from lightmem.testing.llama_server import LlamaServer, smollm2_path, xllamacpp_available
from lightmem.testing.replies import ScriptedLLM
from lightmem.testing.stub_server import OpenAIStubServer

__all__ = ["LlamaServer", "OpenAIStubServer", "ScriptedLLM", "smollm2_path", "xllamacpp_available"]
