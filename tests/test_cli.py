"""The command line, run as a real subprocess; every command must be documented."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lightmem.cli.main import _parser

ROOT = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lightmem.cli.main", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def test_demo_runs_offline_and_cites_sources() -> None:
    out = run("demo")
    assert out.returncode == 0, out.stderr
    assert "source turn s1:5" in out.stdout  # the knee injury is found and cited
    assert "0 LLM calls" in out.stdout


def test_add_search_show_history_stats(tmp_path: Path) -> None:
    store = str(tmp_path / "cli.db")
    out = run("--store", store, "--user-id", "maya", "add", str(FIXTURES / "conversation.json"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"messages": 19, "entries_created": 24}
    out = run(
        "--store", store, "--user-id", "maya", "search", "vegetarian food", "--speaker", "Maya"
    )
    hits = [json.loads(line) for line in out.stdout.splitlines()]
    assert hits[0]["source_ids"] == ["s1:6"]
    shown = json.loads(run("--store", store, "show", hits[0]["id"]).stdout)
    assert shown["sources"][0]["content"].startswith("Oh, and I'm vegetarian")
    hist = [
        json.loads(line)
        for line in run("--store", store, "history", hits[0]["id"]).stdout.splitlines()
    ]
    assert [h["op"] for h in hist] == ["add"]
    stats = json.loads(run("--store", store, "stats").stdout)
    assert stats["entries"] == 19
    ctx = run("--store", store, "search", "knee", "--context", "--budget-tokens", "30")
    assert "knee" in ctx.stdout and "[2 Mar 2024]" in ctx.stdout


def test_add_jsonl_from_stdin(tmp_path: Path) -> None:
    lines = "\n".join(json.dumps({"content": f"fact number {i}"}) for i in range(3))
    out = run("--store", str(tmp_path / "s.db"), "add", "-", stdin=lines)
    assert out.returncode == 0 and json.loads(out.stdout)["messages"] == 3


def test_errors_are_clean(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    out = run("--store", str(tmp_path / "s.db"), "add", str(bad))
    assert out.returncode == 2 and "error: file" in out.stderr
    out = run("--store", str(tmp_path / "s.db"), "search", "  ")
    assert out.returncode == 2 and out.stderr.startswith("error: query")
    out = run("--store", str(tmp_path / "s.db"), "show", "missing")
    assert out.returncode == 2 and "error: id" in out.stderr


def test_bench_locomo_on_fixture(tmp_path: Path) -> None:
    out_file = tmp_path / "bench.json"
    out = run(
        "bench",
        "locomo",
        str(FIXTURES / "locomo_tiny.json"),
        "--budget-tokens",
        "200",
        "--out",
        str(out_file),
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["questions"] == 3  # category 5 and unparseable evidence are skipped
    full = json.loads(out_file.read_text())
    q = full["questions"][0]
    assert set(q) >= {
        "sample_id",
        "question",
        "category",
        "evidence",
        "answer",
        "retrieved",
        "tokens",
    }
    assert all(r["source_ids"] for r in q["retrieved"])
    assert summary["all_evidence_recall"] == 1.0  # three tiny questions, all findable


@pytest.mark.parametrize(
    "command",
    sorted(
        {a.dest for a in []} | set(_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    ),
)
def test_every_command_is_documented_in_the_readme(command: str) -> None:
    readme = (ROOT / "README.md").read_text()
    assert re.search(rf"lightmem (\S+ )*{command}\b", readme), f"`lightmem {command}` undocumented"


def test_bench_cost_on_fixture() -> None:
    out = run("bench", "cost", str(FIXTURES / "locomo_tiny.json"))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    pre, raw = result["pre_compress"], result["no_pre_compress"]
    assert pre["turns"] == raw["turns"] == 5
    assert pre["extract_calls"] >= 1
    assert pre["prompt_tokens"] < raw["prompt_tokens"]  # pre-compression sends less


def test_bench_locomo_llm_path_with_qa_against_the_stub(tmp_path: Path) -> None:
    from lightmem.testing import OpenAIStubServer, ScriptedLLM

    with OpenAIStubServer(chat_handler=ScriptedLLM()) as stub:
        env = {
            **os.environ,
            "LIGHTMEM_LLM_BASE_URL": stub.base_url,
            "LIGHTMEM_LLM_MODEL": "stub",
            "LIGHTMEM_LLM_API_KEY": "k",
        }
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "lightmem.cli.main",
                "bench",
                "locomo",
                str(FIXTURES / "locomo_tiny.json"),
                "--llm",
                "--qa",
                "--budget-tokens",
                "200",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["llm_calls_per_100_turns"] > 0
    ops = {u["op"] for u in summary["usage"] if u["kind"] == "llm"}
    assert {"extract", "qa.answer", "qa.judge"} <= ops
    assert 0.0 <= summary["qa_accuracy"] <= 1.0 and summary["qa_model"] == "openai:stub"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_keys_lifecycle_on_both_backends(tmp_path: Path, backend: str) -> None:
    from conftest import drop_schema, require_postgres

    if backend == "postgres":
        where = ["--dsn", require_postgres()]
        schema = "lightmem_server"  # what the CLI uses
    else:
        where = ["--data-dir", str(tmp_path / "data")]
    created = run("keys", "create", "--tenant", "cli-test", *where)
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["key"]
    prefix = key.split("_")[1]
    listed = [json.loads(line) for line in run("keys", "list", *where).stdout.splitlines()]
    assert {"prefix": prefix, "tenant": "cli-test", "revoked": False} in listed
    assert run("keys", "revoke", prefix, *where).returncode == 0
    listed = [json.loads(line) for line in run("keys", "list", *where).stdout.splitlines()]
    assert {"prefix": prefix, "tenant": "cli-test", "revoked": True} in listed
    missing = run("keys", "revoke", "nosuchkey", *where)
    assert missing.returncode != 0 and "prefix: no key" in missing.stderr
    if backend == "postgres":
        drop_schema(schema)


def test_read_commands_refuse_a_store_that_does_not_exist(tmp_path: Path) -> None:
    for command in (["search", "x"], ["show", "e1"], ["history", "e1"], ["stats"]):
        out = run("--store", str(tmp_path / "nothere.db"), *command)
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip() == (
            f"error: --store: no lightmem store at {str(tmp_path / 'nothere.db')!r}; "
            "'add' creates one"
        )
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_conflicting_store_paths_are_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"store": {"path": str(tmp_path / "a.db")}}))
    out = run("--store", str(tmp_path / "b.db"), "--config", str(cfg), "add", "-", stdin="[]")
    assert out.returncode == 2 and out.stderr.startswith("error: --store:"), out.stderr
    assert "conflicts" in out.stderr and not (tmp_path / "b.db").exists()


def test_keys_create_refuses_a_tenant_with_a_line_break(tmp_path: Path) -> None:
    out = run("keys", "create", "--tenant", "bob\n", "--data-dir", str(tmp_path))
    assert out.returncode == 2 and out.stderr.startswith("error: tenant"), out.stderr
