"""The command line as a first-time user meets it: serving without the server extra, the
undo hint of ``delete``, ``search``'s configured limit, output piped into ``head``, a failed
``bench rss`` case, and a refused ``purge``."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import lightmem
from inprocess_cli import run

FIXTURES = Path(__file__).parent / "fixtures"
#: The lightmem under test, for the child processes.
SRC = Path(lightmem.__file__).resolve().parents[1]

_BLOCKER = '''
import sys


class _Block:
    """Imports of these top-level modules fail, as on an install without them."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _Block())
'''


def _without(tmp_path: Path, *modules: str) -> str:
    """A PYTHONPATH under which ``modules`` cannot be imported (a ``sitecustomize`` that
    refuses them) and the lightmem under test is found."""
    folder = tmp_path / "blocker"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(_BLOCKER.format(blocked=set(modules)))
    return os.pathsep.join([str(folder), str(SRC)])


def _cli(*args: str, pythonpath: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lightmem.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": pythonpath},
    )


def _store_with_memories(path: Path) -> None:
    added = run(
        "--store", str(path), "--user-id", "maya", "add", str(FIXTURES / "conversation.json")
    )
    assert added.returncode == 0, added.stderr


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["serve", "--data-dir", "data", "--port", "1"], "lightmem serve"),
        (["--store", "agent.db", "mcp"], "lightmem mcp"),
        (["mcp", "--transport", "http", "--data-dir", "data", "--port", "1"], "lightmem mcp"),
        (["bench", "serve", "--memories", "10"], "lightmem bench serve"),
        (["bench", "rss", "--case", "baseline"], "lightmem bench rss"),
    ],
)
def test_serving_without_the_server_extra_names_the_pip_line(
    tmp_path: Path, argv: list[str], what: str
) -> None:
    """#2: a core install gets ``error: ...`` with the pip line and status 2, no traceback,
    and nothing is created on the way."""
    work = tmp_path / "work"
    work.mkdir()
    proc = _cli(*argv, pythonpath=_without(tmp_path, "uvicorn"), cwd=work)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"error: {what} needs: pip install 'lightmem[server]' (not installed: uvicorn)\n"
    )
    assert not proc.stdout and list(work.iterdir()) == []


def test_the_undo_hint_of_delete_works_when_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#4: the printed ``restore`` carries the store, the config and the scope in effect."""
    monkeypatch.chdir(tmp_path)
    _store_with_memories(tmp_path / "agent.db")
    Path("cfg.json").write_text(json.dumps({"retrieval": {"limit": 3}}))
    given = ["--store", "agent.db", "--config", "cfg.json", "--user-id", "maya"]
    first = json.loads(run(*given, "list", "--limit", "1", "--json").stdout)[0]
    gone = run(*given, "delete", first["id"][:8])
    assert gone.returncode == 0, gone.stderr
    hint = gone.stdout.split("undo with: ", 1)[1].strip()
    short = run(*given, "restore", first["id"][:8])  # no longer listed: cannot be completed
    assert short.returncode == 2 and "a deleted memory needs its full id" in short.stderr
    words = shlex.split(hint)
    assert words[0] == "lightmem" and words[-2:] == ["restore", first["id"]]
    assert {"--store", "--config", "--user-id"} <= set(words)
    back = run(*words[1:])
    assert back.returncode == 0, back.stderr
    assert back.stdout.startswith(f"Restored [{first['id'][:8]}] as version 2")


def test_the_undo_hint_spells_out_a_store_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#4: a store that came from ``$LIGHTMEM_STORE`` is named, so the hint works where the
    variable is not set (another shell)."""
    monkeypatch.chdir(tmp_path)
    _store_with_memories(tmp_path / "env.db")
    monkeypatch.setenv("LIGHTMEM_STORE", "env.db")
    first = json.loads(run("--user-id", "maya", "list", "--limit", "1", "--json").stdout)[0]
    hint = run("--user-id", "maya", "delete", first["id"]).stdout.split("undo with: ", 1)[1]
    monkeypatch.delenv("LIGHTMEM_STORE")
    back = run(*shlex.split(hint)[1:])
    assert back.returncode == 0, back.stderr


def test_search_limit_defaults_to_the_configured_one(tmp_path: Path) -> None:
    """#7: without ``--limit``, ``retrieval.limit`` of ``--config`` applies."""
    store = tmp_path / "agent.db"
    _store_with_memories(store)
    cfg = tmp_path / "lim1.json"
    cfg.write_text(json.dumps({"retrieval": {"limit": 1}}))
    given = ["--store", str(store), "--config", str(cfg), "--user-id", "maya"]
    hits = run(*given, "search", "knee", "--json")
    assert hits.returncode == 0, hits.stderr
    assert len(json.loads(hits.stdout)) == 1
    assert len(json.loads(run(*given, "search", "knee", "--limit", "3", "--json").stdout)) == 3
    no_config = run("--store", str(store), "--user-id", "maya", "search", "knee", "--json")
    assert len(json.loads(no_config.stdout)) == 10  # the library's default


def test_output_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """#10: ``lightmem list | head -n 1``: the reader is gone before the output is written;
    no traceback, and the status a SIGPIPE would give (141)."""
    store = tmp_path / "agent.db"
    _store_with_memories(store)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lightmem.cli.main", "--store", str(store), "list", "--limit", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # long before the child has imported lightmem and written anything
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""


def test_bench_rss_counts_a_failed_case_and_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#11: a case whose child failed (here: no httpx in the child) is not retrievable, and
    the command exits 1."""
    monkeypatch.setenv("PYTHONPATH", _without(tmp_path, "httpx"))  # the children only
    out = run("bench", "rss", "--case", "baseline")
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["failed"] == 1 and "httpx" in report["cases"][0]["error"]
    assert report["all_retrievable"] is False and report["all_under_1gb"] is False


@pytest.mark.parametrize(
    "argv",
    [["purge"], ["purge", "e1", "--node", "n1"]],
    ids=["no-target", "id-and-node"],
)
def test_a_refused_purge_creates_no_store(tmp_path: Path, argv: list[str]) -> None:
    """#13: arguments refused on their own are refused before the store is opened."""
    store = tmp_path / "fresh.db"
    out = run("--store", str(store), *argv)
    assert out.returncode == 2 and out.stderr.startswith(("error: entry_id:", "error: --node:"))
    assert list(tmp_path.iterdir()) == []
