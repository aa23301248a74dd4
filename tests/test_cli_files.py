"""The file ``lightmem add`` reads: encodings editors write, JSON or JSONL, errors that name the
file and line; and how ``list`` tags what ``summarize`` wrote."""

from __future__ import annotations

import codecs
import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inprocess_cli import run
from lightmem.cli.files import decode_text, parse_messages
from lightmem.cli.output import memory_line
from lightmem.errors import InvalidInputError
from lightmem.pipeline.context_format import format_line
from lightmem.types import WINDOW_SUMMARY, MemoryEntry, Scope

FIXTURES = Path(__file__).parent / "fixtures"
MESSAGES = [
    {
        "speaker_name": "Maya",
        "timestamp": "2024-03-02T09:15:00",
        "content": "Je suis végétarienne.",
    },
    {"speaker_name": "Maya", "timestamp": "2024-03-02T09:16:00", "content": "我住在里斯本。"},
]


def _added(tmp_path: Path, data: bytes, name: str = "conv.json") -> list[str]:
    """Add ``data`` as a file; the contents ``list --json`` shows afterwards."""
    path = tmp_path / name
    path.write_bytes(data)
    store = str(tmp_path / "s.db")
    out = run("--store", store, "add", str(path), "--json")
    assert out.returncode == 0, out.stderr
    listed = run("--store", store, "list", "--kind", "entry", "--json")
    return sorted(e["original_text"] for e in json.loads(listed.stdout))


@pytest.mark.parametrize(
    ("bom", "encoding"),
    [
        (b"", "utf-8"),
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
)
def test_add_reads_utf8_and_marked_unicode_files_alike(
    tmp_path: Path, bom: bytes, encoding: str
) -> None:
    data = bom + json.dumps(MESSAGES, ensure_ascii=False).encode(encoding)
    texts = _added(tmp_path, data)
    assert texts == sorted(m["content"] for m in MESSAGES)  # no mark kept, nothing garbled


def test_a_marked_jsonl_file_from_stdin_keeps_its_first_line(tmp_path: Path) -> None:
    lines = "\r\n".join(json.dumps(m, ensure_ascii=False) for m in MESSAGES)
    store = str(tmp_path / "s.db")
    out = run("--store", store, "add", "-", "--json", stdin=codecs.BOM_UTF8 + lines.encode())
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["messages"] == 2


def test_a_legacy_code_page_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin.json"
    path.write_bytes(json.dumps(MESSAGES[:1], ensure_ascii=False).encode("cp1252"))
    out = run("--store", str(tmp_path / "s.db"), "add", str(path))
    assert out.returncode == 2
    assert (
        str(path) in out.stderr and "not UTF-8" in out.stderr and "save it as UTF-8" in out.stderr
    )
    assert (
        not (tmp_path / "s.db").exists()
        or "végé" not in run("--store", str(tmp_path / "s.db"), "list", "--json").stdout
    )


def test_utf16_without_a_mark_is_refused_not_stored_as_nul_characters(tmp_path: Path) -> None:
    path = tmp_path / "conv.json"
    path.write_bytes(json.dumps(MESSAGES).encode("utf-16-le"))
    out = run("--store", str(tmp_path / "s.db"), "add", str(path))
    assert out.returncode == 2 and "NUL" in out.stderr and str(path) in out.stderr


def test_one_message_object_spread_over_lines_is_one_message(tmp_path: Path) -> None:
    data = json.dumps(MESSAGES[0], indent=2, ensure_ascii=False).encode()
    assert _added(tmp_path, data) == [MESSAGES[0]["content"]]


def test_an_object_wrapping_the_list_is_refused_not_added_as_one_message(tmp_path: Path) -> None:
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"messages": MESSAGES}), encoding="utf-8")
    out = run("--store", str(tmp_path / "s.db"), "add", str(path))
    assert out.returncode == 2 and '"messages" list' in out.stderr and str(path) in out.stderr


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "is empty"),
        (b"  \n\n", "is empty"),
        (b"[]", "messages: the list is empty"),
        (json.dumps([MESSAGES[0], {"content": "x", "timestamp": "soon"}]).encode(),
         "messages[1].timestamp"),
        (json.dumps([{"content": "x", "role": "User"}]).encode(), "messages[0].role"),
        ("Je suis végétarienne".encode("cp1252"), "not UTF-8"),
    ],
)  # fmt: skip
def test_a_file_that_cannot_be_added_leaves_no_store_behind(
    tmp_path: Path, data: bytes, says: str
) -> None:
    """Every message is checked before the store is opened (opening creates the file), so
    a mistyped add does not leave an empty store that later commands would search."""
    path = tmp_path / "conv.json"
    path.write_bytes(data)
    store = tmp_path / "s.db"
    out = run("--store", str(store), "add", str(path))
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert not store.exists()
    piped = run("--store", str(store), "add", "-", stdin=data)
    assert piped.returncode == 2 and says in piped.stderr and not store.exists()


def test_a_broken_jsonl_line_is_named_by_its_line_number(tmp_path: Path) -> None:
    good = [json.dumps({"content": f"fact {i}"}) for i in range(3)]
    path = tmp_path / "conv.jsonl"
    # blank line 3; the broken record is on line 5 as an editor counts
    path.write_text("\n".join([good[0], good[1], "", good[2], '{"content": "cut off', ""]))
    out = run("--store", str(tmp_path / "s.db"), "add", str(path))
    assert out.returncode == 2 and f"{path} line 5 is not JSON" in out.stderr


def test_a_broken_document_over_many_lines_reports_the_json_position(tmp_path: Path) -> None:
    path = tmp_path / "conv.json"
    path.write_text('[\n  {"content": "a"},\n  {"content": "b",}\n]\n')
    out = run("--store", str(tmp_path / "s.db"), "add", str(path))
    assert out.returncode == 2 and f"{path} is not JSON" in out.stderr and "line 3" in out.stderr


def test_a_line_separator_inside_a_jsonl_string_does_not_split_the_record() -> None:
    record = '{"content": "first\u2028second"}'
    assert parse_messages(record + "\n" + record, "f") == [{"content": "first\u2028second"}] * 2


@given(st.lists(st.fixed_dictionaries({"content": st.text(min_size=1)}), min_size=1, max_size=5))
def test_every_encoding_and_layout_reads_back_the_same_messages(msgs: list[dict[str, str]]) -> None:
    layouts = [json.dumps(msgs, ensure_ascii=False), "\n".join(json.dumps(m) for m in msgs)]
    for text in layouts:
        for bom, enc in (
            (b"", "utf-8"),
            (codecs.BOM_UTF8, "utf-8"),
            (codecs.BOM_UTF16_LE, "utf-16-le"),
        ):
            try:
                decoded = decode_text(bom + text.encode(enc, "surrogatepass"), "f")
            except InvalidInputError:
                # only text no Unicode file can hold: lone surrogates
                assert any(_surrogate(m["content"]) for m in msgs)
                continue
            assert parse_messages(decoded, "f") == msgs


def _surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def test_summarize_windows_are_listed_apart_from_topic_summaries(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    run("--store", store, "--user-id", "maya", "add", str(FIXTURES / "conversation.json"))
    assert (
        run("--store", store, "--user-id", "maya", "summarize", "--window", "30d").returncode == 0
    )
    listed = run(
        "--store", store, "--user-id", "maya", "list", "--kind", "summary", "--limit", "100"
    )
    lines = listed.stdout.splitlines()
    windows = [ln for ln in lines if "(window) " in ln]
    topics = [ln for ln in lines if "(topic) " in ln]
    assert windows and topics and len(windows) + len(topics) == len(lines)


def test_prompt_context_tags_a_window_summary_as_the_list_does() -> None:
    entry = MemoryEntry(
        id="w",
        kind="summary",
        text="1 Mar 2024 to 30 Mar 2024: Maya trained for a half marathon.",
        original_text="Maya trained for a half marathon.",
        scope=Scope(),
        metadata={"summary_of": WINDOW_SUMMARY},
    )
    assert format_line(entry).startswith("- (window) 1 Mar 2024")
    assert "(window) " in memory_line(entry)
    topic = replace(entry, metadata={})
    assert format_line(topic).startswith("- (topic) ") and "(topic) " in memory_line(topic)


def test_a_refused_jsonl_message_is_named_by_its_line(tmp_path: Path) -> None:
    """Blank lines do not shift it: the third line is the second message."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"content": "hi"}\n\n{"content": "x", "timestamp": "nope"}\n')
    out = run("--store", str(tmp_path / "s.db"), "add", str(path))
    assert out.returncode == 2
    assert f"file: {path} line 3: messages[1].timestamp" in out.stderr
    listed = tmp_path / "bad.json"  # a JSON list has no lines to name: its position stays
    listed.write_text('[{"content": "hi"}, {"content": "x", "timestamp": "nope"}]')
    out = run("--store", str(tmp_path / "s.db"), "add", str(listed))
    assert "error: messages[1].timestamp" in out.stderr and "line" not in out.stderr
