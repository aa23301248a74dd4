"""Pre-compression: drop low-information tokens before anything is buffered or extracted."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from lightmem.errors import BackendError, ConfigError
from lightmem.text import NEGATIONS, QUANTITIES, STOPWORDS, WORD_RE


@runtime_checkable
class Compressor(Protocol):
    """Shortens text while keeping what a later question could ask about."""

    name: str

    def compress(self, text: str) -> str: ...


class NoCompressor:
    """Keeps text unchanged (``pre_compress: False``)."""

    name = "off"

    def compress(self, text: str) -> str:
        return text


class EntropyCompressor:
    """Keeps the ``rate`` share of words with the highest surprisal, in their original order.

    Surprisal comes from the word-frequency model shipped in ``wordfreq`` (-log10 of the
    word's frequency in a large English corpus), so it loads offline in milliseconds.
    Numbers and quantity words, capitalised words (names, places) and negations are always
    kept: they carry the facts a question asks about, and dropping a negation would invert
    a memory.
    """

    name = "entropy"

    def __init__(self, rate: float = 0.3, *, lang: str = "en") -> None:
        if not 0 < rate <= 1:
            raise ConfigError(
                f"pre_compressor.configs.compress_config.rate: must be in (0, 1], got {rate}"
            )
        self.rate = rate
        self._lang = lang
        self._cache: dict[str, float] = {}
        try:
            import wordfreq
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise BackendError("wordfreq is not installed") from exc
        self._zipf: Any = wordfreq.zipf_frequency

    def surprisal(self, word: str) -> float:
        """Information of one word in bits-like units (higher = rarer = keep)."""
        w = word.lower()
        cached = self._cache.get(w)
        if cached is None:
            # zipf = log10(frequency per billion words); 8 is above the most common word.
            cached = 0.0 if w in STOPWORDS else 8.0 - float(self._zipf(w, self._lang))
            if len(self._cache) < 200_000:
                self._cache[w] = cached
        return cached

    def compress(self, text: str) -> str:
        spans = [(m.group(), _sentence_start(text, m.start())) for m in WORD_RE.finditer(text)]
        if not spans:
            return text.strip()
        toks = [t for t, _ in spans]
        keep_n = max(1, math.ceil(self.rate * len(toks)))
        forced = [_forced(t, initial) for t, initial in spans]
        ranked = sorted(
            (i for i in range(len(toks)) if not forced[i] and toks[i].lower() not in STOPWORDS),
            key=lambda i: -self.surprisal(toks[i]),
        )
        budget = max(0, keep_n - sum(forced))
        chosen = set(ranked[:budget])
        return " ".join(t for i, t in enumerate(toks) if forced[i] or i in chosen)


def _sentence_start(text: str, pos: int) -> bool:
    before = text[:pos].rstrip(" \t\"'“‘(")
    return not before or before[-1] in ".!?\n"


def _forced(tok: str, sentence_initial: bool) -> bool:
    """Numbers, quantities, negations and names are kept whatever their frequency."""
    low = tok.lower()
    if tok[0].isdigit() or low in NEGATIONS or low in QUANTITIES:
        return True
    if low in STOPWORDS:
        return False
    if tok.isupper() and len(tok) > 1:  # acronyms: LGBTQ, NASA
        return True
    return tok[0].isupper() and not sentence_initial


class LLMLingua2Compressor:
    """LLMLingua-2 token classification from a local model folder (``llmlingua`` extra)."""

    name = "llmlingua-2"

    def __init__(self, model_path: str, *, rate: float = 0.6, device: str = "cpu") -> None:
        if not 0 < rate <= 1:
            raise ConfigError(
                f"pre_compressor.configs.compress_config.rate: must be in (0, 1], got {rate}"
            )
        if not Path(model_path).expanduser().is_dir():
            raise ConfigError(
                f"pre_compressor.configs.llmlingua_config.model_name: {model_path!r} is not a "
                "local folder; lightmem never downloads weights"
            )
        try:
            from llmlingua import PromptCompressor
        except ImportError as exc:
            raise BackendError("llmlingua-2 needs: pip install 'lightmem[llmlingua]'") from exc
        try:
            self._pc: Any = PromptCompressor(
                model_name=str(Path(model_path).expanduser()),
                device_map=device,
                use_llmlingua2=True,
            )
        except Exception as exc:
            raise BackendError(f"cannot load LLMLingua-2 from {model_path!r}: {exc}") from exc
        self.rate = rate

    def compress(self, text: str) -> str:
        try:
            out = self._pc.compress_prompt(text, rate=self.rate, force_tokens=["\n", "?", "!"])
        except Exception as exc:
            raise BackendError(f"LLMLingua-2 compression failed: {exc}") from exc
        return str(out["compressed_prompt"]).strip() or text.strip()
