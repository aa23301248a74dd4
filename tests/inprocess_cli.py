"""The command line run in the test process: ``main(argv)`` with its own stdin, stdout and
stderr, its exit code as a process would report it.

Starting ``python -m lightmem.cli.main`` costs an interpreter, lightmem's imports and an
embedder load per call (about half a CPU-second, several seconds on a loaded machine); the
tests whose point is a real process (start-up, signals, the entry point, a fresh interpreter)
still start one.
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass

from lightmem.cli.main import main


@dataclass(frozen=True)
class CliResult:
    """What a finished ``lightmem`` process would leave: exit code, stdout, stderr."""

    returncode: int
    stdout: str
    stderr: str


def run(*args: str, stdin: str | bytes | None = None) -> CliResult:
    """``lightmem ARGS`` in this process (argparse's exits become the exit code); ``stdin``
    as text (sent as UTF-8) or as the bytes a pipe would carry."""
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse: --help, usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin = saved_stdin
    return CliResult(code, out.getvalue(), err.getvalue())
