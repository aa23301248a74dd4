"""Language-aware text processing: script detection and word segmentation.

One place decides how text is cut into words, so the compressor, the BM25 index, keyword
summaries, the update detector and token counting agree. Space-delimited text (English and
every other language written with spaces) is cut exactly as before: ``\\w+`` runs with
inner apostrophes. Text in scripts written without spaces is segmented per message:

- Chinese (Han characters, no kana): dictionary segmentation with ``jieba`` (MIT, pure
  Python, dictionary inside the package; loaded on first use, never for English text);
- Japanese (any kana in the message): no dictionary segmenter ships offline with a small
  install, so words are script runs (kanji / hiragana / katakana), the kanji runs cut into
  overlapping bigrams for the index, the way Lucene's CJK analyser does;
- Korean (Hangul): words are already space-delimited but carry attached particles
  ("서울에서"), so the index adds syllable bigrams to each word and the words stay whole.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CJK_FUNCTION_WORDS",
    "CJK_QUESTION_WORDS",
    "CJK_RE",
    "DICT_SEGMENT_MAX_CHARS",
    "HAN_PIECE_CHARS",
    "TAG_MAX_CHARS",
    "TAG_UNKNOWN_CHARS",
    "WORD_RE",
    "Lang",
    "Token",
    "cjk_chars",
    "detect",
    "has_cjk",
    "index_terms",
    "strip_cjk",
    "tagged_words",
    "tokens",
    "words",
]

Lang = Literal["zh", "ja", "ko", "en"]

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_KANA = "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
CJK_RE = re.compile(f"[{_HAN}{_KANA}{_HANGUL}]")
_HAN_RE = re.compile(f"[{_HAN}]")
#: The longest piece of a run of Han characters jieba segments or tags at once: its cost
#: grows faster than the run (see ``_han_words``), and a real sentence is shorter.
HAN_PIECE_CHARS = 200
#: The longest text the part-of-speech tagger reads (a sentence; see ``tagged_words``),
#: and how many characters its model does not know a piece may hold to be read by it.
TAG_MAX_CHARS = 2_000
TAG_UNKNOWN_CHARS = 2
_LONG_HAN_RE = re.compile(f"[{_HAN}]{{{HAN_PIECE_CHARS + 1},}}")
_KANA_RE = re.compile(f"[{_KANA}]")
_HANGUL_RE = re.compile(f"[{_HANGUL}]")
WORD_RE = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)
# Script runs inside one \w+ match: Han, hiragana, katakana, Hangul, everything else.
_RUN_RE = re.compile(
    f"[{_HAN}]+|[\u3040-\u309f]+|[\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]+|[{_HANGUL}]+|"
    f"[^{_HAN}{_KANA}{_HANGUL}]+"
)
# Detection reads this many characters: enough for any message's script, bounded for
# a 1,000,000-character one.
_DETECT_CHARS = 4096
# Dictionary segmentation runs at roughly 25-100k characters a second (pure Python); a
# longer message (a pasted document) is cut into script runs and bigrams instead, which is
# regex-fast, so ingesting it stays bounded.
DICT_SEGMENT_MAX_CHARS = 100_000

# Chinese particles and Japanese particles / copulas / auxiliary endings carry no fact a
# question asks about. Pronouns and negations are deliberately absent ("我", "不", "没",
# "ない"): they say whose fact it is and whether it holds.
CJK_FUNCTION_WORDS: frozenset[str] = frozenset(
    """
    的 了 着 过 吗 呢 吧 啊 呀 哦 嗯 哈 嘛 啦 哇 喔 呗 之 地 得 所 么
    は が を に で と も の へ や ね よ か な わ ぞ さ て た だ です ます でした ました
    ですね ですよ ている てい いる ある する した して され から まで より けど けれど
    """.split()
)
# Words that only ask ("什么", "哪里") and the commonest pronouns, prepositions and
# adverbs: left out of query terms and keyword summaries, like English stopwords (the
# compressor keeps them: only particles go there).
CJK_QUESTION_WORDS: frozenset[str] = frozenset(
    """
    什么 哪里 哪儿 哪个 哪些 怎么 怎样 怎么样 为什么 多少 几 谁 是否 是不是
    我 你 他 她 它 我们 你们 他们 她们 自己 这 那 这个 那个 这些 那些 在 是 和 与 及 跟
    对 把 被 给 从 向 就 都 也 还 又 很 一个 有 会 要 能 去 来 说
    なに なん どこ だれ いつ どう どれ どの なぜ
    """.split()
)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds any Han, kana or Hangul character."""
    return not text.isascii() and CJK_RE.search(text) is not None


def detect(text: str) -> Lang:
    """The writing system of one message, from its first few thousand characters.

    "en" stands for every space-delimited language (the default rules); "ja" wins as soon
    as kana appear (Japanese mixes kanji and kana), "zh" for mostly-Han text, "ko" for
    mostly-Hangul text.
    """
    if text.isascii():
        return "en"
    head = text[:_DETECT_CHARS]
    han = len(_HAN_RE.findall(head))
    kana = len(_KANA_RE.findall(head))
    hangul = len(_HANGUL_RE.findall(head))
    letters = sum(1 for c in head if c.isalpha())
    cjk = han + kana + hangul
    if cjk == 0 or cjk * 3 < letters:  # a name or two inside an English sentence
        return "en"
    if kana:
        return "ja"
    return "ko" if hangul > han else "zh"


@dataclass(frozen=True, slots=True)
class Token:
    """One word of a message: its text and where it starts."""

    text: str
    start: int
    cjk: bool


class _Jieba:
    """The Chinese segmenter, loaded once per process on first use (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tk: Any = None
        self._pos: Any = None

    def get(self) -> Any:
        with self._lock:
            if self._tk is None:
                import logging

                import jieba

                # jieba logs its dictionary loading at DEBUG through its own handler.
                jieba.setLogLevel(logging.WARNING)
                tk = jieba.Tokenizer()
                tk.initialize()
                self._tk = tk
            return self._tk

    def pos(self) -> Any:
        """jieba's part-of-speech tagger over the same dictionary (loaded on first use)."""
        tk = self.get()
        with self._lock:
            if self._pos is None:
                import jieba.posseg

                self._pos = jieba.posseg.POSTokenizer(tk)
            return self._pos

    def known_chars(self) -> Mapping[str, Any]:
        """The characters the tagger's model has a table of tags for."""
        import jieba.posseg

        table: Mapping[str, Any] = jieba.posseg.char_state_tab_P
        return table


_JIEBA = _Jieba()


def _han_words(run: str, lang: Lang | Literal["long"]) -> list[tuple[str, int]]:
    """Words of a run of Han characters, with offsets inside the run ("zh" only; any
    other language, or "long", keeps the run whole). jieba reads at most
    :data:`HAN_PIECE_CHARS` characters at a time: its cost grows faster than the run
    (a run of one character repeated 40,000 times took 50 s), and a real sentence is
    shorter, so only a word across a cut can be split."""
    if lang != "zh" or len(run) == 1:
        return [(run, 0)]
    jieba = _JIEBA.get()
    return [
        (w, start + s)
        for start, piece in _cut_run(run)
        for w, s, _ in jieba.tokenize(piece, HMM=True)
    ]


def _cut_run(run: str) -> Iterator[tuple[int, str]]:
    """``run`` in pieces of at most :data:`HAN_PIECE_CHARS` characters, with their offsets."""
    for start in range(0, len(run), HAN_PIECE_CHARS):
        yield start, run[start : start + HAN_PIECE_CHARS]


def tokens(text: str, lang: Lang | None = None) -> Iterator[Token]:
    """The words of ``text`` in order (case kept), segmented by its language."""
    if lang is None:
        lang = detect(text)
    seg: Lang | Literal["long"] = "long" if len(text) > DICT_SEGMENT_MAX_CHARS else lang
    for m in WORD_RE.finditer(text):
        word = m.group()
        if word.isascii() or not CJK_RE.search(word):
            yield Token(word, m.start(), False)
            continue
        for r in _RUN_RE.finditer(word):
            run, base = r.group(), m.start() + r.start()
            if not CJK_RE.match(run):
                yield Token(run, base, False)
            elif _HAN_RE.match(run):
                for w, s in _han_words(run, seg):
                    yield Token(w, base + s, True)
            else:
                yield Token(run, base, True)


def tagged_words(text: str) -> list[tuple[str, str]]:
    """The words of a Chinese ``text`` with jieba's part-of-speech tags ("ns" a place, "nr"
    a person, "m" a number, "x" punctuation, ...), in order. For the update detector's
    Chinese reading; texts past :data:`TAG_MAX_CHARS` are not tagged (empty). The tagger's
    hidden Markov model weighs every tag for a character its table does not know (about
    250, against a few for a known one: 200 rare characters took 3 s), so a piece holding
    more than :data:`TAG_UNKNOWN_CHARS` of them is tagged by the dictionary alone."""
    if len(text) > TAG_MAX_CHARS:
        return []
    tagger, known = _JIEBA.pos(), _JIEBA.known_chars()
    out: list[tuple[str, str]] = []
    for piece in _han_pieces(text):
        unknown = sum(1 for c in piece if c not in known and _HAN_RE.match(c))
        out += [(p.word, p.flag) for p in tagger.cut(piece, HMM=unknown <= TAG_UNKNOWN_CHARS)]
    return out


def _han_pieces(text: str) -> Iterator[str]:
    """``text`` in pieces whose runs of Han characters hold at most
    :data:`HAN_PIECE_CHARS` characters (a longer run is cut; nothing else is)."""
    start = 0
    for m in _LONG_HAN_RE.finditer(text):
        if m.start() > start:
            yield text[start : m.start()]
        yield from (piece for _, piece in _cut_run(m.group()))
        start = m.end()
    if start < len(text):
        yield text[start:]


def words(text: str) -> list[str]:
    """Word tokens of ``text`` in order, case preserved (segmented for CJK)."""
    if text.isascii() or not CJK_RE.search(text):
        return WORD_RE.findall(text)
    return [t.text for t in tokens(text)]


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) < 3 else [run[i : i + 2] for i in range(len(run) - 1)]


def index_terms(text: str) -> list[str]:
    """Lower-cased terms for a keyword index (before stemming), in order.

    Space-delimited text gives its ``\\w+`` runs exactly as before. Chinese words come
    from the segmenter, and a word longer than two characters also adds its bigrams, so
    "开心果" matches a question about "开心"; Japanese kanji and kana runs and Korean
    words give overlapping bigrams (plus the whole word), since their word boundaries
    are not known here.
    """
    low = text.lower()
    if low.isascii() or not CJK_RE.search(low):
        return _PLAIN_TERMS.findall(low)
    lang: Lang | Literal["long"] = detect(low)
    if len(low) > DICT_SEGMENT_MAX_CHARS:
        lang = "long"
    out: list[str] = []
    for m in _PLAIN_TERMS.finditer(low):
        word = m.group()
        if not CJK_RE.search(word):
            out.append(word)
            continue
        for r in _RUN_RE.finditer(word):
            run = r.group()
            if not CJK_RE.match(run):
                out.append(run)
            elif lang == "zh" and _HAN_RE.match(run):
                for w, _ in _han_words(run, lang):
                    out.append(w)
                    if len(w) > 2:
                        out.extend(_bigrams(w))
            else:
                out.append(run)
                if len(run) > 2:
                    out.extend(_bigrams(run))
    return out


_PLAIN_TERMS = re.compile(r"\w+", re.UNICODE)


def cjk_chars(text: str) -> int:
    """How many Han, kana and Hangul characters ``text`` holds."""
    if text.isascii():
        return 0
    return len(text) - len(CJK_RE.sub("", text))


def strip_cjk(text: str) -> str:
    """``text`` with every CJK character replaced by a space."""
    return CJK_RE.sub(" ", text)
