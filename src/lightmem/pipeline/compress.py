"""Pre-compression: drop low-information tokens before anything is buffered or extracted."""

from __future__ import annotations

import copy
import math
import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from lightmem import lang as L
from lightmem.errors import BackendError, ConfigError
from lightmem.ledger import Ledger
from lightmem.text import (
    NEGATIONS,
    QUANTITIES,
    STOPWORDS,
    WORD_RE,
    content_terms,
    estimate_tokens,
)

__all__ = ["Compressor", "EntropyCompressor", "LLMLingua2Compressor", "NoCompressor"]

#: Punctuation at a word's edges ("pm," -> "pm"; "$1,250" and "50%" stay as they are).
_EDGE = re.compile(r"^[^\w$€£¥]+|[^\w%]+$")


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
    word's frequency in a large corpus of the word's language), so it loads offline in
    milliseconds. Numbers and quantity words, capitalised words (names, places) and
    negations are always kept: they carry the facts a question asks about, and dropping a
    negation would invert a memory.

    Scripts without case (Chinese, Japanese) cannot mark names by a capital, and a clause
    there is one or two whitespace "words", so a rate would drop whole clauses: a message
    in them (see :func:`lightmem.lang.detect`) keeps every word but the function words
    (particles such as 的, 了, は, を) and its clause punctuation, whatever the rate.
    Korean keeps its words whole (their particles are attached). Both paths are one pass
    over the text plus a sort of its words: linear up to the sort, for any length.
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
            if w in STOPWORDS or w in L.CJK_FUNCTION_WORDS:
                cached = 0.0
            else:
                wl = self._word_lang(w)
                cached = 8.0 if wl is None else 8.0 - float(self._zipf(w, wl))
            if len(self._cache) < 200_000:
                self._cache[w] = cached
        return cached

    def _word_lang(self, w: str) -> str | None:
        """wordfreq's language for ``w``; None where no frequency list is usable."""
        if not L.has_cjk(w):
            return self._lang
        # wordfreq ranks Chinese with jieba; Japanese and Korean need MeCab, which is not
        # installed, so their words count as unseen (rare, so kept) rather than failing.
        return "zh" if L.detect(w) == "zh" else None

    def compress(self, text: str) -> str:
        lang = L.detect(text)
        if lang != "en":
            return _compress_uncased(text, lang)
        spans = list(_words_with_starts(text))
        if not spans:
            return text.strip()
        toks = [t for t, _, _ in spans]
        forced = [_forced(t, initial) for t, initial, _ in spans]
        keep_n = max(1, math.ceil(self.rate * len(toks)))
        budget = max(0, keep_n - sum(forced))
        scope = _negated(toks, [brk for _, _, brk in spans])
        out = self._keep(toks, [f or k in scope for k, f in enumerate(forced)], budget, scope)
        # a turn of common words only ("OK", "I am.", "Not now") has nothing to drop
        return out if _has_content(out) else text.strip()

    def cut(self, text: str, keep: frozenset[str] = frozenset()) -> str:
        """Shorten a memory's stored text to its names, numbers and negations and the
        rarest ``rate`` share (at least two) of its other words. Words are what whitespace
        separates, without the punctuation at their edges, so "2023-06-09", "$1,250" and
        "3.5k" stay whole. A capital marks a name wherever it stands (in keywords this
        compressor made, a first word is no sentence start), and the forced words do not
        use up the share: "10 days fencing no" keeps "fencing". Two words at least, since
        a line that short saves little and one word alone loses what it was about
        ("stopped pottery chess" -> "pottery"). Text it cannot shorten (scripts other than
        English, nothing left, no fewer tokens) comes back as it was. Words in ``keep``
        (lower-cased) are kept like names."""
        words = [w for w in (_EDGE.sub("", piece) for piece in text.split()) if w]
        if L.detect(text) != "en" or not words:
            return text
        forced = [_forced(w, False) or w.lower() in keep for w in words]
        others = len(words) - sum(forced)
        out = self._keep(words, forced, max(2, math.ceil(self.rate * others)))
        return out if out and estimate_tokens(out) < estimate_tokens(text) else text

    def _keep(
        self,
        toks: list[str],
        forced: list[bool],
        budget: int,
        scope: Mapping[int, bool] | None = None,
    ) -> str:
        """The forced words and the ``budget`` rarest others, in their original order; a
        word of ``scope`` mapped to True closes a negation's scope at a clause break, which
        a comma marks when more words follow ("don't drink coffee, herbal tea")."""
        ranked = sorted(
            (i for i in range(len(toks)) if not forced[i] and toks[i].lower() not in STOPWORDS),
            key=lambda i: -self.surprisal(toks[i]),
        )
        chosen = set(ranked[:budget])
        kept = [i for i in range(len(toks)) if forced[i] or i in chosen]
        scope = scope or {}
        return " ".join(
            toks[i] + ("," if scope.get(i) and n + 1 < len(kept) else "")
            for n, i in enumerate(kept)
        )


_SPACES = re.compile(r"\s+")
_SKIP_BEFORE = " \t\"'“‘("


def _words_with_starts(text: str) -> Iterator[tuple[str, bool, bool]]:
    """Each word, whether it opens a sentence and whether a clause break (punctuation)
    comes right after it, in one pass (only the gap between two words is looked at, so a
    1,000,000-character message stays linear)."""
    prev_end = 0
    word, initial = "", True
    for m in WORD_RE.finditer(text):
        raw = text[prev_end : m.start()]
        if word:
            yield word, initial, bool(_BREAK.search(raw))
        gap = raw.rstrip(_SKIP_BEFORE)
        # with no gap, either nothing or a word comes right before it
        initial = gap[-1] in ".!?\n" if gap else prev_end == 0
        word = m.group()
        prev_end = m.end()
    if word:
        yield word, initial, True


#: What ends a clause between two words (and with it the reach of a negation).
_BREAK = re.compile(r"[,;:.!?\n()\u2013\u2014]|\s-\s")
#: Content words a negation keeps after it: the predicate it negates and its object
#: ("don't drink coffee", "isn't a big fan": fan), not the rest of a long clause.
_NEGATED_WORDS = 3


def _is_negation(word: str) -> bool:
    low = word.lower().replace("\u2019", "'")
    return low in NEGATIONS or low.endswith("n't")


def _negated(toks: list[str], breaks: list[bool]) -> dict[int, bool]:
    """The content words each negation applies to (up to :data:`_NEGATED_WORDS`, within its
    clause), each mapped to whether it is the last one before a clause break: kept with
    the negation, since "don't" without "coffee" says nothing and "don't herbal tea"
    says the opposite."""
    out: dict[int, bool] = {}
    for k, tok in enumerate(toks):
        if not _is_negation(tok) or breaks[k]:
            continue
        taken: list[int] = []
        for j in range(k + 1, len(toks)):
            if not _is_negation(toks[j]) and toks[j].lower() not in STOPWORDS:
                out[j] = False
                taken.append(j)
            if breaks[j] or len(taken) == _NEGATED_WORDS:
                if taken and breaks[j]:
                    out[taken[-1]] = True
                break
    return out


def _has_content(text: str) -> bool:
    """Whether ``text`` holds a word other than stopwords and negations."""
    return any(not _is_negation(w) for w in content_terms(text))


def _compress_uncased(text: str, lang: L.Lang) -> str:
    """Drop function words; keep every other word, numbers and the clause punctuation."""
    out: list[str] = []
    prev_end = 0
    for tok in L.tokens(text, lang):
        gap = _SPACES.sub(" ", text[prev_end : tok.start])  # punctuation, spaces collapsed
        mark = gap.strip()
        if mark:
            out.append(gap.lstrip() if not out or out[-1].endswith(" ") else gap)
        elif prev_end < tok.start and out and not out[-1].endswith(" "):
            out.append(" ")
        prev_end = tok.start + len(tok.text)
        low = tok.text.lower()
        if tok.cjk and low in L.CJK_FUNCTION_WORDS:
            continue
        if not tok.cjk and low in STOPWORDS and low not in NEGATIONS:
            continue
        if mark == "" and out and not out[-1].endswith(" ") and _needs_space(out[-1], tok):
            out.append(" ")
        out.append(tok.text)
    tail = _SPACES.sub(" ", text[prev_end:]).rstrip()
    if tail:
        out.append(tail)
    return "".join(out).strip() or text.strip()


def _needs_space(before: str, tok: L.Token) -> bool:
    """Two Latin words (or numbers) that end up adjacent need a space between them."""
    return not tok.cjk and not L.has_cjk(before[-1:]) and before[-1:].isalnum()


def _forced(tok: str, sentence_initial: bool) -> bool:
    """Numbers, quantities, negations and names are kept whatever their frequency."""
    low = tok.lower()
    if tok[0].isdigit() or _is_negation(tok) or low in QUANTITIES:
        return True
    if low in STOPWORDS:
        return False
    if tok.isupper() and len(tok) > 1:  # acronyms: LGBTQ, NASA
        return True
    return tok[0].isupper() and not sentence_initial


class LLMLingua2Compressor:
    """LLMLingua-2 token classification from a local model folder (``llmlingua`` extra).

    The model is loaded here, once: :meth:`with_ledger` copies share it (one model for many
    memories, e.g. a server's tenants), each accounting its calls in its own ledger."""

    name = "llmlingua-2"

    def __init__(
        self,
        model_path: str,
        *,
        rate: float = 0.6,
        device: str = "cpu",
        ledger: Ledger | None = None,
    ) -> None:
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
        # One call at a time on the shared model: llmlingua promises no thread safety, and a
        # Hugging Face fast tokenizer used by two threads at once can fail ("Already
        # borrowed"); the copies of several tenants call it concurrently.
        self._lock = threading.Lock()
        self.rate = rate
        #: Every model call is accounted here (``("compress", "llmlingua-2")``), like the
        #: embedder's and the LLM's; token counts are estimates of the text sent.
        self.ledger = ledger if ledger is not None else Ledger()

    def with_ledger(self, ledger: Ledger) -> LLMLingua2Compressor:
        """The same loaded model (and its lock) accounting into another ledger."""
        twin = copy.copy(self)  # shallow: the model and the lock are shared
        twin.ledger = ledger
        return twin

    def compress(self, text: str) -> str:
        with self.ledger.measure("compress", self.name) as call:
            call.items, call.prompt_tokens, call.estimated = 1, estimate_tokens(text), True
            try:
                with self._lock:
                    out = self._pc.compress_prompt(
                        text, rate=self.rate, force_tokens=["\n", "?", "!"]
                    )
            except Exception as exc:
                raise BackendError(f"LLMLingua-2 compression failed: {exc}") from exc
        return str(out["compressed_prompt"]).strip() or text.strip()
