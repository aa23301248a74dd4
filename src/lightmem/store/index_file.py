"""The file that keeps a store's search index between runs: named numpy arrays behind a
JSON header, every section with its CRC-32, written to a temporary file and renamed into
place, so a reader sees a whole old file or a whole new one.

Layout: ``MAGIC``, the header's length (8 bytes, little-endian), its CRC-32 (4 bytes), the
header (JSON: ``meta`` and the sections' name, dtype, shape, offset, size, CRC-32), then
each section's raw bytes at 64-byte aligned offsets. Anything that does not check out is
:class:`DamagedIndexFile`, and the caller rebuilds from the store.
"""

from __future__ import annotations

import json
import os
import secrets
import struct
import zlib
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.errors import StoreError

MAGIC = b"LMINDEX1"
_ALIGN = 64


class DamagedIndexFile(StoreError):
    """The saved index is missing, truncated, altered or of another format."""


def _crc(data: memoryview | bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def write(path: Path, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> None:
    """Write ``arrays`` (C-contiguous after conversion) and ``meta`` atomically to ``path``."""
    sections, offset = [], 0
    blobs = []
    for name, arr in arrays.items():
        a = np.ascontiguousarray(arr)
        if a.dtype == object:
            raise TypeError(f"section {name!r}: object arrays cannot be saved")
        raw = a.reshape(-1).view(np.uint8).data
        offset = -(-offset // _ALIGN) * _ALIGN
        sections.append(
            {
                "name": name,
                "dtype": a.dtype.str,
                "shape": list(a.shape),
                "offset": offset,
                "nbytes": raw.nbytes,
                "crc": _crc(raw),
            }
        )
        blobs.append((offset, raw))
        offset += raw.nbytes
    header = json.dumps({"meta": meta, "sections": sections}).encode()
    base = len(MAGIC) + 12 + len(header)
    base = -(-base // _ALIGN) * _ALIGN
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + struct.pack("<QI", len(header), _crc(header)) + header)
            for off, raw in blobs:
                f.seek(base + off)
                f.write(raw)
            f.truncate(base + offset)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read(
    path: Path, grow: Collection[str] = ()
) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """``(meta, arrays)`` from ``path``. A section named in ``grow`` comes with a quarter
    more unused rows after its data (memory untouched until appended to): its first
    ``shape[0]`` rows, as written, are the data."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC) + 12)
            if len(head) != len(MAGIC) + 12 or head[: len(MAGIC)] != MAGIC:
                raise DamagedIndexFile(f"{path}: not a lightmem index file")
            size, crc = struct.unpack("<QI", head[len(MAGIC) :])
            header = f.read(size)
            if len(header) != size or _crc(header) != crc:
                raise DamagedIndexFile(f"{path}: header damaged")
            doc = json.loads(header)
            base = -(-(len(MAGIC) + 12 + size) // _ALIGN) * _ALIGN
            total = os.fstat(f.fileno()).st_size
            arrays: dict[str, npt.NDArray[Any]] = {}
            for sec in doc["sections"]:
                shape = tuple(int(x) for x in sec["shape"])
                extra = shape[0] // 4 + 1024 if shape and sec["name"] in grow else 0
                full = np.empty((shape[0] + extra, *shape[1:]) if shape else (), sec["dtype"])
                arr = full[: shape[0]] if shape else full
                view = arr.reshape(-1).view(np.uint8).data
                if view.nbytes != sec["nbytes"] or base + sec["offset"] + view.nbytes > total:
                    raise DamagedIndexFile(f"{path}: section {sec['name']!r} truncated")
                f.seek(base + sec["offset"])
                if view.nbytes and f.readinto(view) != view.nbytes:
                    raise DamagedIndexFile(f"{path}: section {sec['name']!r} truncated")
                if _crc(view) != sec["crc"]:
                    raise DamagedIndexFile(f"{path}: section {sec['name']!r} damaged")
                arrays[sec["name"]] = full
    except FileNotFoundError as exc:
        raise DamagedIndexFile(f"{path}: no saved index") from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DamagedIndexFile(f"{path}: unreadable ({exc})") from exc
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        raise DamagedIndexFile(f"{path}: header has no meta")
    return meta, arrays
