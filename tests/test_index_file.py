"""The saved-index file: sections come back as written, with room to append that changes
nothing on disk, and any altered, moved or cut part of a section is detected."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem.store import index_file
from lightmem.store.index_file import MAGIC, DamagedIndexFile, checksum, spare_rows


def _arrays(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(rows)
    return {
        "matrix": rng.standard_normal((rows, 24)).astype(np.float32),
        "alive": rng.integers(0, 2, rows).astype(np.bool_),
        "blob": np.frombuffer(b"abcdefg" * rows, dtype=np.uint8),
    }


def _base(path: Path) -> int:
    data = path.read_bytes()
    size: int
    (size,) = struct.unpack("<Q", data[len(MAGIC) : len(MAGIC) + 8])
    return -(-(len(MAGIC) + 12 + size) // 64) * 64


def test_sections_come_back_with_room_to_append(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    arrays = _arrays(1000)
    index_file.write(path, {"n": 1000}, arrays, grow=("matrix", "alive"))
    meta, got = index_file.read(path)
    assert meta == {"n": 1000}
    for name in ("matrix", "alive"):
        assert got[name].shape[0] == 1000 + spare_rows(1000)
        np.testing.assert_array_equal(got[name][:1000], arrays[name])
        assert not got[name][1000:].any()  # the reserved room reads as zeros
    np.testing.assert_array_equal(got["blob"], arrays["blob"])
    assert got["blob"].shape == arrays["blob"].shape
    # The reserved room is a hole: the file is not larger on disk by it.
    assert path.stat().st_blocks * 512 < path.stat().st_size


def test_changes_to_the_read_arrays_stay_in_this_process(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index_file.write(path, {}, _arrays(300), grow=("matrix",))
    before = path.read_bytes()
    _, got = index_file.read(path)
    got["matrix"][0] = 0.0  # a tombstone
    got["matrix"][300:310] = 1.0  # appended rows
    got["alive"][:] = False
    assert path.read_bytes() == before
    _, again = index_file.read(path)
    assert again["matrix"][0].any() and not again["matrix"][300:].any()


def test_a_file_of_the_previous_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index_file.write(path, {}, _arrays(10))
    path.write_bytes(b"LMINDEX1" + path.read_bytes()[len(MAGIC) :])
    with pytest.raises(DamagedIndexFile, match="not a lightmem index file"):
        index_file.read(path)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9), st.integers(1, 255))
def test_any_altered_byte_is_detected(
    tmp_path_factory: pytest.TempPathFactory, where: int, flip: int
) -> None:
    path = tmp_path_factory.mktemp("f") / "x.index"
    arrays = _arrays(700)
    index_file.write(path, {}, arrays, grow=("matrix",))
    data = bytearray(path.read_bytes())
    base = _base(path)
    # A byte inside the data of some section (not the reserved room, which nothing reads).
    spans, offset = [], 0
    for name, a in arrays.items():
        offset = -(-offset // 64) * 64
        spans.append((base + offset, a.nbytes))
        rows = a.shape[0] if a.shape else 1
        cap = rows + spare_rows(rows) if name == "matrix" else rows
        offset += a.nbytes // rows * cap
    start, size = spans[where % len(spans)]
    pos = start + (where // len(spans)) % size
    data[pos] ^= flip
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedIndexFile, match="damaged"):
        index_file.read(path)


def test_moved_blocks_and_a_cut_file_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    arrays = {"m": np.random.default_rng(0).standard_normal(4096).astype(np.float32)}
    index_file.write(path, {}, arrays)
    data = bytearray(path.read_bytes())
    base = _base(path)
    first, second = data[base : base + 4096], data[base + 4096 : base + 8192]
    data[base : base + 4096], data[base + 4096 : base + 8192] = second, first
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedIndexFile, match="damaged"):
        index_file.read(path)
    index_file.write(path, {}, arrays)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DamagedIndexFile, match="truncated"):
        index_file.read(path)


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=0, max_size=20_000), st.integers(0, 10**6))
def test_checksum_sees_one_changed_byte_anywhere(data: bytes, where: int) -> None:
    a = np.frombuffer(data, dtype=np.uint8)
    if not data:
        assert checksum(a) == checksum(np.zeros(0, dtype=np.uint8))
        return
    b = a.copy()
    b[where % b.size] ^= 0x5A
    assert checksum(a) != checksum(b)
    assert checksum(a) != checksum(np.concatenate([a, np.zeros(1, dtype=np.uint8)]))
