"""Language-aware text processing: segmentation, token counts, compression and the BM25
tokeniser for Chinese, Japanese and Korean; English exactly as before."""

from __future__ import annotations

import math
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem import lang
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.store.text_index import BM25Index, Stemmer
from lightmem.text import content_terms, estimate_tokens, words

ZH = "我叫王芳，住在杭州，是一名小学数学老师。"
QUICKSTART_ZH = "我最喜欢吃开心果口味的冰淇淋，我的猫叫小橘。"


@pytest.fixture(scope="module")
def compressor() -> EntropyCompressor:
    return EntropyCompressor(0.3)


# -- English is unchanged -----------------------------------------------------------------
latin = st.text(
    alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789 .,'!?\n-éü")),
    max_size=200,
)


@settings(max_examples=200, deadline=None)
@given(latin)
def test_space_delimited_text_is_tokenised_and_counted_as_before(text: str) -> None:
    n = len(text.split())
    assert estimate_tokens(text) == (math.ceil(n * 1.3) if n else 0)
    assert words(text) == re.findall(r"\w+(?:['’]\w+)*", text)
    assert lang.index_terms(text) == re.findall(r"\w+", text.lower())
    assert lang.detect(text) == "en"


def test_an_english_sentence_with_a_chinese_name_stays_english() -> None:
    assert lang.detect("We flew to 北京 last spring for the marathon") == "en"


# -- detection and segmentation -----------------------------------------------------------
def test_detection_per_message() -> None:
    assert lang.detect(ZH) == "zh"
    assert lang.detect("東京に住んでいます。") == "ja"
    assert lang.detect("저는 서울에서 살아요.") == "ko"


def test_chinese_is_cut_into_words() -> None:
    got = words(ZH)
    for w in ("王芳", "杭州", "小学"):
        assert w in got
    assert "我叫王芳" not in got  # a whole clause is not one word any more


def test_query_terms_drop_particles_and_question_words() -> None:
    terms = content_terms("王芳住在哪里？")
    assert "王芳" in terms and "哪里" not in terms
    assert "的" not in content_terms("我的猫叫什么名字？")


# -- token counting ------------------------------------------------------------------------
def test_cjk_counts_about_one_token_per_character() -> None:
    assert estimate_tokens("我的猫叫小橘") == 6
    # mixed text: CJK characters plus the other words x 1.3
    assert estimate_tokens("我在 Google 工作") == 4 + math.ceil(1 * 1.3)
    assert estimate_tokens("고양이 이름") == 5
    long_zh = ZH * 20
    assert estimate_tokens(long_zh) >= len(lang.CJK_RE.findall(long_zh))


# -- compression ---------------------------------------------------------------------------
def test_the_quickstart_sentence_keeps_the_cats_name(compressor: EntropyCompressor) -> None:
    out = compressor.compress(QUICKSTART_ZH)
    assert "小橘" in out and "开心果" in out and "冰淇淋" in out
    assert "的" not in out  # particles go
    assert "，" in out  # clause punctuation stays readable


def test_every_clause_keeps_its_facts(compressor: EntropyCompressor) -> None:
    out = compressor.compress(ZH)
    for fact in ("王芳", "杭州", "小学", "数学"):
        assert fact in out


CONTENT = ["王芳", "杭州", "钢琴", "芒果", "老师", "雪球", "黄山", "医院", "咖啡馆", "西安"]
PARTICLES = ["的", "了", "吗", "呢", "吧"]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(CONTENT),
            st.sampled_from(PARTICLES),
            st.integers(0, 9999).map(str),
            st.sampled_from(["，", "。", "！"]),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_no_content_word_or_number_is_dropped(pieces: list[str]) -> None:
    text = "".join(pieces)
    out = _COMPRESSOR.compress(text)
    kept = lang.words(out)
    for w in lang.words(text):
        if w not in lang.CJK_FUNCTION_WORDS:
            assert w in kept or w in out


_COMPRESSOR = EntropyCompressor(0.3)


def test_japanese_and_korean_keep_their_content(compressor: EntropyCompressor) -> None:
    ja = compressor.compress("東京に住んでいます。猫の名前はタマです。")
    assert "東京" in ja and "タマ" in ja and "猫" in ja
    ko = compressor.compress("저는 서울에서 살고 있어요. 고양이 이름은 나비예요.")
    assert "서울에서" in ko and "나비예요" in ko and "있어요. 고양이" in ko


def test_long_messages_compress_in_one_pass(compressor: EntropyCompressor) -> None:
    # 300,000 characters: a scan of the text before every word (the old sentence-start
    # check) takes minutes here, one pass well under a second.
    en = ("Maria ran 12 miles in Boston, and she never stopped. " * 6_000)[:300_000]
    t0 = time.perf_counter()
    out = compressor.compress(en)
    assert "12" in out and "Boston" in out
    # past DICT_SEGMENT_MAX_CHARS a message is cut by script runs, not the dictionary
    zh = (ZH + "我的猫叫小橘。") * (lang.DICT_SEGMENT_MAX_CHARS // 20)
    assert len(zh) > lang.DICT_SEGMENT_MAX_CHARS
    out = compressor.compress(zh)
    assert out.count("杭州") == zh.count("杭州") and out.count("小橘") == zh.count("小橘")
    assert len(lang.index_terms(zh)) > len(zh) // 2
    assert time.perf_counter() - t0 < 60


# -- the BM25 tokeniser ---------------------------------------------------------------------
TURNS = [
    "你好王芳，好久不见！",
    ZH,
    "我最近对芒果过敏，吃了一口嘴就肿了。",
    "周末我一般在家练钢琴，跟着网上的老师学了半年。",
    "今天天气真不错。",
]


@pytest.mark.parametrize(
    ("question", "answer_row"),
    [("王芳对什么过敏？", 2), ("王芳在学什么乐器？钢琴", 3), ("王芳住在杭州吗", 1)],
)
def test_bm25_matches_chinese_words_not_whole_clauses(question: str, answer_row: int) -> None:
    stemmer = Stemmer()
    index = BM25Index.build(TURNS, stemmer)
    hits = index.search(content_terms(question), stemmer, None, 3)
    assert hits and hits[0][0] == answer_row


def test_index_terms_add_bigrams_for_long_words_and_unknown_scripts() -> None:
    assert "开心" in lang.index_terms("开心果")
    assert "서울" in lang.index_terms("서울에서")
    assert "東京" in lang.index_terms("東京に住む")


def test_jieba_reads_a_long_han_run_a_bounded_piece_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run of one character repeated 40,000 times took 50 s in one piece (jieba's cost
    grows faster than the run); the offsets still point at the text."""
    import jieba

    read: list[int] = []
    real = jieba.Tokenizer.tokenize

    def counted(self: object, text: str, **kw: object) -> object:
        read.append(len(text))
        return real(self, text, **kw)

    monkeypatch.setattr(jieba.Tokenizer, "tokenize", counted)
    text = "我住在上海。" + "三" * 1_000 + "，我的猫叫小橘。"
    toks = list(lang.tokens(text, "zh"))
    assert read and max(read) < 1_000  # never the whole run
    assert all(text[t.start : t.start + len(t.text)] == t.text for t in toks)
    assert {"上海", "小橘"} <= {t.text for t in toks}


def test_the_tagger_reads_rare_characters_by_the_dictionary_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its model weighs every tag for a character it has no table for: 200 of them took
    3 s. A piece with more than two is tagged without the model; a sentence keeps it (a
    name the dictionary lacks is still found), and a text past 2,000 characters is not
    tagged at all."""
    import jieba.posseg

    used: list[bool] = []
    real = jieba.posseg.POSTokenizer.cut

    def counted(self: object, text: str, HMM: bool = True) -> object:
        used.append(HMM)
        return real(self, text, HMM=HMM)

    monkeypatch.setattr(jieba.posseg.POSTokenizer, "cut", counted)
    assert ("小橘", "n") in lang.tagged_words("我家猫叫小橘，住在上海浦东。") and used == [True]
    used.clear()
    assert len(lang.tagged_words("龘" * 200)) == 200 and used == [False]
    assert lang.tagged_words("我住在上海。" * 400) == []
