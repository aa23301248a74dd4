"""The file that keeps a store's search index between runs: named numpy arrays behind a
JSON header, every section with its checksum, written to a temporary file and renamed into
place, so a reader sees a whole old file or a whole new one.

Layout: ``MAGIC``, the header's length (8 bytes, little-endian), its CRC-32 (4 bytes), the
header (JSON: ``meta`` and the sections' name, dtype, shape, capacity, offset, size,
checksum), then each section's raw bytes at 64-byte aligned offsets. A section written with
``spare`` rows reserves room for them after its data (a hole: no disk space, zeros when read).

The file is read by mapping it copy-on-write, not by reading it into fresh memory: opening a
million-row index then costs the checksum pass over pages the kernel already caches, not
gigabytes of allocation and copying, and rows appended into the reserved room (or
tombstoned) change only this process's copy of the pages they touch. Anything that does
not check out is :class:`DamagedIndexFile`, and the caller rebuilds from the store.

The checksum (:func:`checksum`) is a CRC-32 over the 64-bit wrapping sums of the section's
4 KiB blocks (the last one zero-padded): a pass at memory speed, split over two threads,
where a CRC-32 of gigabytes costs seconds. It detects truncation and any altered, zeroed or
moved block; like any checksum it is not a defence against deliberate tampering, which needs
write access to the store's folder anyway.
"""

from __future__ import annotations

import json
import mmap
import os
import secrets
import struct
import zlib
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.errors import StoreError

__all__ = ["MAGIC", "DamagedIndexFile", "checksum", "read", "spare_rows", "write"]

MAGIC = b"LMINDEX2"
_ALIGN = 64
_BLOCK_WORDS = 512  # 4 KiB blocks of 64-bit words
_CHUNK_WORDS = 8 * 2**20  # words summed per step (64 MiB): bounded temporaries


class DamagedIndexFile(StoreError):
    """The saved index is missing, truncated, altered or of another format."""


def spare_rows(rows: int) -> int:
    """Room reserved after a growable section of ``rows`` rows: appends fill it in place."""
    return rows // 4 + 1024


def checksum(data: npt.NDArray[np.uint8]) -> int:
    """The section checksum of ``data`` (one-dimensional bytes); see the module docstring."""
    size = data.size
    whole = size // 8
    words = data[: whole * 8].view(np.uint64)
    sums = []
    for start in range(0, whole, _CHUNK_WORDS):
        chunk = words[start : start + _CHUNK_WORDS]
        full = chunk.size // _BLOCK_WORDS * _BLOCK_WORDS
        sums.append(chunk[:full].reshape(-1, _BLOCK_WORDS).sum(axis=1, dtype=np.uint64))
        rest = chunk[full:]
        if rest.size:
            sums.append(rest.sum(dtype=np.uint64, keepdims=True))
    tail = data[whole * 8 :]
    crc = zlib.crc32(struct.pack("<Q", size))
    for part in sums:
        crc = zlib.crc32(part.astype("<u8", copy=False).tobytes(), crc)
    return zlib.crc32(tail.tobytes(), crc) & 0xFFFFFFFF


def _crc(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def write(
    path: Path,
    meta: dict[str, Any],
    arrays: dict[str, npt.NDArray[Any]],
    grow: Collection[str] = (),
) -> None:
    """Write ``arrays`` (C-contiguous after conversion) and ``meta`` atomically to ``path``;
    sections named in ``grow`` get :func:`spare_rows` of reserved room after their data."""
    sections, offset = [], 0
    blobs = []
    for name, arr in arrays.items():
        a = np.ascontiguousarray(arr)
        if a.dtype == object:
            raise TypeError(f"section {name!r}: object arrays cannot be saved")
        raw = a.reshape(-1).view(np.uint8)
        rows = a.shape[0]  # (ascontiguousarray gives at least one dimension)
        row_bytes = a.itemsize * int(np.prod(a.shape[1:], dtype=np.int64))
        capacity = rows + spare_rows(rows) if name in grow else rows
        offset = -(-offset // _ALIGN) * _ALIGN
        sections.append(
            {
                "name": name,
                "dtype": a.dtype.str,
                "shape": list(a.shape),
                "capacity": capacity,
                "offset": offset,
                "nbytes": raw.nbytes,
                "checksum": checksum(raw),
            }
        )
        blobs.append((offset, raw))
        offset += row_bytes * capacity
    header = json.dumps({"meta": meta, "sections": sections}).encode()
    base = len(MAGIC) + 12 + len(header)
    base = -(-base // _ALIGN) * _ALIGN
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + struct.pack("<QI", len(header), _crc(header)) + header)
            for off, raw in blobs:
                f.seek(base + off)
                f.write(raw.data)
            f.truncate(base + offset)  # the reserved room after the last section: a hole
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read(path: Path) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """``(meta, arrays)`` from ``path``, each array a copy-on-write view of the mapped file.
    A section written with spare rows comes with them (zeros) after its data: its first
    ``shape[0]`` rows, as written, are the data."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC) + 12)
            if len(head) != len(MAGIC) + 12 or head[: len(MAGIC)] != MAGIC:
                raise DamagedIndexFile(f"{path}: not a lightmem index file of this version")
            size, crc = struct.unpack("<QI", head[len(MAGIC) :])
            header = f.read(size)
            if len(header) != size or _crc(header) != crc:
                raise DamagedIndexFile(f"{path}: header damaged")
            doc = json.loads(header)
            base = -(-(len(MAGIC) + 12 + size) // _ALIGN) * _ALIGN
            total = os.fstat(f.fileno()).st_size
            mapped = mmap.mmap(f.fileno(), total, access=mmap.ACCESS_COPY)
        arrays: dict[str, npt.NDArray[Any]] = {}
        checks: list[tuple[str, npt.NDArray[np.uint8], int]] = []
        for sec in doc["sections"]:
            shape = tuple(int(x) for x in sec["shape"])
            if not shape:
                raise DamagedIndexFile(f"{path}: section {sec['name']!r} has no shape")
            dtype = np.dtype(sec["dtype"])
            full_shape = (int(sec["capacity"]), *shape[1:])
            items = int(np.prod(full_shape, dtype=np.int64))
            start = base + int(sec["offset"])
            if start + items * dtype.itemsize > total:
                raise DamagedIndexFile(f"{path}: section {sec['name']!r} truncated")
            full = np.frombuffer(mapped, dtype, items, start).reshape(full_shape)
            arr = full[: shape[0]]
            data = arr.reshape(-1).view(np.uint8)
            if data.nbytes != int(sec["nbytes"]) or full_shape[0] < shape[0]:
                raise DamagedIndexFile(f"{path}: section {sec['name']!r} has the wrong size")
            checks.append((sec["name"], data, int(sec["checksum"])))
            arrays[sec["name"]] = full
        with ThreadPoolExecutor(2) as pool:  # numpy's sums release the GIL
            sums = list(pool.map(lambda c: checksum(c[1]), checks))
        for (name, _, want), got in zip(checks, sums, strict=True):
            if got != want:
                raise DamagedIndexFile(f"{path}: section {name!r} damaged")
    except FileNotFoundError as exc:
        raise DamagedIndexFile(f"{path}: no saved index") from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DamagedIndexFile(f"{path}: unreadable ({exc})") from exc
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        raise DamagedIndexFile(f"{path}: header has no meta")
    return meta, arrays
