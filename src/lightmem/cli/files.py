"""Reading the conversation file ``lightmem add`` is given: its encoding, then JSON or JSONL.

Files come from editors, spreadsheets and other programs, so the reader accepts what they
write for text (UTF-8 with or without a byte-order mark, UTF-16 or UTF-32 with one) and
refuses anything else by name rather than guessing a legacy code page and storing mojibake.
"""

from __future__ import annotations

import codecs
import json
from typing import Any

from lightmem.errors import InvalidInputError

__all__ = ["decode_text", "numbered_messages", "parse_messages"]

# Longest first: the UTF-32-LE mark begins with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_SAVE_AS = "save it as UTF-8"


def decode_text(data: bytes, name: str) -> str:
    """``data`` as text: the encoding its byte-order mark names, else UTF-8. Bytes that are
    not UTF-8, or NUL characters (UTF-16 saved without a mark), are refused naming ``name``."""
    encoding, body = "utf-8", data
    for bom, enc in _BOMS:
        if data.startswith(bom):
            encoding, body = enc, data[len(bom) :]
            break
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        offset = exc.start + len(data) - len(body)
        raise InvalidInputError(
            f"file: {name} is not {encoding.upper()} text (byte 0x{body[exc.start]:02x} at "
            f"offset {offset}); {_SAVE_AS}"
        ) from None
    if "\x00" in text:
        raise InvalidInputError(
            f"file: {name} holds NUL characters (UTF-16 or UTF-32 without a byte-order "
            f"mark?); {_SAVE_AS}"
        )
    return text


def parse_messages(text: str, name: str) -> list[Any]:
    """The messages in ``text``: a JSON list of message objects, one message object, or JSONL
    (one object per line, blank lines skipped). A file with nothing in it is refused, as the
    library refuses an empty list: an empty pipe is a mistake more often than a choice.
    Errors name the file and, for JSONL, the line as an editor numbers it."""
    return numbered_messages(text, name)[0]


def numbered_messages(text: str, name: str) -> tuple[list[Any], list[int] | None]:
    """:func:`parse_messages` with, for JSONL, the line of each message as an editor
    numbers it (None for JSON), so that a message refused later can be named by its line."""
    if not text.strip():
        raise InvalidInputError(
            f"file: {name} is empty; give a JSON list of messages, one message object, or JSONL"
        )
    try:
        whole = json.loads(text)
    except ValueError as exc:
        return _jsonl(text, name, exc)
    if isinstance(whole, list):
        return whole, None
    if isinstance(whole, dict):
        if "messages" in whole and isinstance(whole["messages"], list):
            raise InvalidInputError(
                f'file: {name} holds an object with a "messages" list; give the list itself '
                f"(a JSON list of messages, or JSONL)"
            )
        return [whole], None
    raise InvalidInputError(
        f"file: {name} must hold a list of messages, got a JSON {type(whole).__name__}"
    )


def _jsonl(text: str, name: str, whole_error: ValueError) -> tuple[list[Any], list[int]]:
    # "\n" alone ends a line: str.splitlines would also split at U+2028 and other
    # characters a JSON string may hold unescaped.
    numbered = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    out: list[Any] = []
    for n, line in numbered:
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            if n == numbered[0][0]:
                # Not even the first line is JSON: a document spread over lines, broken
                # somewhere; the whole-file parser says where.
                raise InvalidInputError(f"file: {name} is not JSON: {whole_error}") from None
            raise InvalidInputError(f"file: {name} line {n} is not JSON: {exc}") from None
    return out, [n for n, _ in numbered]
