"""A dependency-free PNG line chart (stdlib zlib), for benchmark curves."""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

__all__ = ["line_chart"]

_PALETTE = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189))


def line_chart(
    path: str | Path, series: Sequence[Sequence[float]], width: int = 480, height: int = 300
) -> None:
    """Draw each series as a polyline over its index (x) on shared axes and write a PNG."""
    pixels = [[(255, 255, 255)] * width for _ in range(height)]
    pad = 30
    values = [v for s in series for v in s]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    longest = max((len(s) for s in series), default=1)

    def xy(i: int, v: float) -> tuple[int, int]:
        x = pad + round(i * (width - 2 * pad) / max(1, longest - 1))
        y = height - pad - round((v - lo) * (height - 2 * pad) / (hi - lo))
        return x, y

    for x in range(pad, width - pad + 1):
        pixels[height - pad][x] = (0, 0, 0)
    for y in range(pad, height - pad + 1):
        pixels[y][pad] = (0, 0, 0)
    for k, s in enumerate(series):
        colour = _PALETTE[k % len(_PALETTE)]
        points = [xy(i, v) for i, v in enumerate(s)]
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            steps = max(abs(x1 - x0), abs(y1 - y0), 1)
            for t in range(steps + 1):
                x = x0 + (x1 - x0) * t // steps
                y = y0 + (y1 - y0) * t // steps
                _dot(pixels, x, y, colour)
        for x, y in points:
            for dx in (-2, -1, 0, 1, 2):
                for dy in (-2, -1, 0, 1, 2):
                    _dot(pixels, x + dx, y + dy, colour)
    raw = b"".join(b"\x00" + bytes(c for px in row for c in px) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    png = b"\x89PNG\r\n\x1a\n"
    png += chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    Path(path).write_bytes(png)


def _dot(pixels: list[list[tuple[int, int, int]]], x: int, y: int, c: tuple[int, int, int]) -> None:
    if 0 <= y < len(pixels) and 0 <= x < len(pixels[0]):
        pixels[y][x] = c
