"""Text embedders: one public ``embed`` that accounts every call, one private hook per backend."""

from lightmem.embed.base import Embedder
from lightmem.embed.e5 import E5SmallEmbedder
from lightmem.embed.minilm import MiniLMEmbedder
from lightmem.embed.openai_compat import OpenAIEmbedder
from lightmem.embed.sentence_transformers import SentenceTransformerEmbedder
from lightmem.embed.use_multilingual import USEMultilingualEmbedder
from lightmem.embed.wordllama import WordLlamaEmbedder

__all__ = [
    "E5SmallEmbedder",
    "Embedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "USEMultilingualEmbedder",
    "WordLlamaEmbedder",
]
