"""The command line; every command must be documented.

Commands run in-process (``inprocess_cli.run``: ``main(argv)`` with its own streams and exit
code); the demo, the entry point and the documented ``make`` targets run as real processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from inprocess_cli import run
from lightmem.cli.main import _parser

ROOT = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess[str]:
    """One run of ``lightmem demo`` as a real process (the installed entry point's module),
    shared by the tests that read its output."""
    return subprocess.run(
        [sys.executable, "-m", "lightmem.cli.main", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_runs_offline_and_cites_sources(demo: subprocess.CompletedProcess[str]) -> None:
    out = demo
    assert out.returncode == 0, out.stderr
    assert "source turn s1:5" in out.stdout  # the knee injury is found and cited
    assert "0 LLM calls" in out.stdout
    assert "19 memories and 5 topic summaries" in out.stdout


def _demo_answers(out: str) -> dict[str, str]:
    """Each demo question with the source turn of its first answer."""
    first: dict[str, str] = {}
    question = ""
    for line in out.splitlines():
        if line.startswith("Q: "):
            question = line[3:]
        elif question and line.startswith("  1. "):
            first[question] = line.rsplit("source turn ", 1)[1]
            question = ""
    return first


@pytest.mark.parametrize(
    ("question", "turns"),
    [
        ("What race did Maya sign up for?", {"s1:1"}),
        ("Does Maya have any injuries?", {"s1:5", "s3:1"}),
        ("What does Maya eat? Any diet restrictions?", {"s1:6", "s1:7"}),
        ("Which project does Maya lead at work now?", {"s3:4"}),
        ("How fast did Maya finish the half marathon?", {"s4:1"}),
    ],
)
def test_demo_answers_its_questions_first(
    question: str, turns: set[str], demo: subprocess.CompletedProcess[str]
) -> None:
    answers = _demo_answers(demo.stdout)
    assert answers[question] in turns, answers


def test_make_demo_installs_the_core_only(tmp_path: Path) -> None:
    out = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "demo", f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    installs = [ln for ln in out.stdout.splitlines() if "pip install" in ln and "-e" in ln]
    assert installs and all(ln.rstrip().endswith("-e .") for ln in installs), installs
    dry = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "test", f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "'.[dev]'" in dry.stdout  # the tests keep the dev extras


def test_add_search_show_history_stats(tmp_path: Path) -> None:
    store = str(tmp_path / "cli.db")
    out = run(
        "--store", store, "--user-id", "maya", "add", str(FIXTURES / "conversation.json"), "--json"
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "messages": 19,
        "messages_added": 19,
        "entries_created": 24,
        "facts": 19,
        "topic_summaries": 5,
    }
    out = run(
        "--store",
        store,
        "--user-id",
        "maya",
        "search",
        "vegetarian food",
        "--speaker",
        "Maya",
        "--json",
    )
    hits = json.loads(out.stdout)
    assert hits[0]["source_ids"] == ["s1:6"] and hits[0]["rank"] == 1
    shown = json.loads(run("--store", store, "show", hits[0]["id"], "--json").stdout)
    assert shown["sources"][0]["content"].startswith("Oh, and I'm vegetarian")
    hist = json.loads(run("--store", store, "history", hits[0]["id"], "--json").stdout)
    assert [h["op"] for h in hist] == ["add"]
    stats = json.loads(run("--store", store, "stats", "--json").stdout)
    assert stats["entries"] == 19
    ctx = run("--store", store, "search", "knee", "--context", "--budget-tokens", "30")
    assert "knee" in ctx.stdout and "[2 March 2024]" in ctx.stdout


MEMORY_LINE = re.compile(r"(\d{4}-\d{2}-\d{2}|undated   ) {2}.+ {2}\[([^\]\s]{1,8})\]")


def test_output_is_for_people_by_default(tmp_path: Path) -> None:
    store = str(tmp_path / "cli.db")
    added = run("--store", store, "--user-id", "maya", "add", str(FIXTURES / "conversation.json"))
    assert added.stdout.strip() == (
        "Added 19 of 19 messages (0 already stored). Created 24 memories: 19 from the "
        "messages and 5 topic summaries."
    )
    out = run(
        "--store", store, "--user-id", "maya", "search", "vegetarian food", "--speaker", "Maya"
    )
    lines = out.stdout.splitlines()
    assert lines and all(re.fullmatch(r" *\d+\. " + MEMORY_LINE.pattern, ln) for ln in lines)
    assert lines[0].startswith("  1. 2024-03-02  Maya: Oh, and I'm vegetarian")
    assert "{" not in out.stdout and "score" not in out.stdout  # ranks, not raw scores
    shown = run("--store", store, "show", MEMORY_LINE.search(lines[0]).group(2))  # type: ignore[union-attr]
    assert shown.returncode == 0, shown.stderr
    assert "source turns:" in shown.stdout and "s1:6" in shown.stdout
    none = run("--store", store, "--user-id", "nobody", "search", "vegetarian food")
    assert none.returncode == 0 and none.stdout == "No memory matches this query in this scope.\n"
    stats = run("--store", store, "stats")
    assert re.search(r"^entries: +19$", stats.stdout, re.M), stats.stdout
    again = run("--store", store, "--user-id", "maya", "add", str(FIXTURES / "conversation.json"))
    assert again.stdout.startswith("Added 0 of 19 messages (19 already stored)."), again.stdout


def test_list_update_delete_restore_by_short_id(tmp_path: Path) -> None:
    store = str(tmp_path / "cli.db")
    run("--store", store, "--user-id", "maya", "add", str(FIXTURES / "conversation.json"))
    listed = run("--store", store, "--user-id", "maya", "list", "--kind", "entry", "--limit", "3")
    lines = listed.stdout.splitlines()
    assert len(lines) == 4 and lines[-1] == "(more: --offset 3)", listed.stdout
    assert all(MEMORY_LINE.fullmatch(ln) for ln in lines[:3])
    short = MEMORY_LINE.fullmatch(lines[0]).group(2)  # type: ignore[union-attr]
    up = run("--store", store, "--user-id", "maya", "update", short, "Maya runs 5k now.")
    assert up.returncode == 0 and up.stdout.startswith(f"Updated [{short}] to version 2"), up
    assert "Maya runs 5k now." in run("--store", store, "list", "--limit", "50").stdout
    gone = run("--store", store, "--user-id", "maya", "delete", short)
    assert gone.stdout.startswith(
        f"Deleted [{short}]; undo with: lightmem --store {store} --user-id maya restore {short}"
    )
    full_id = gone.stdout.split()[-1]
    assert "Maya runs 5k now." not in run("--store", store, "list", "--limit", "50").stdout
    back = run("--store", store, "--user-id", "maya", "restore", full_id, "--version", "2")
    assert back.stdout.startswith(f"Restored [{short}] as version 3: Maya runs 5k now."), back
    hist = run("--store", store, "history", full_id).stdout.splitlines()
    assert [h.split()[1] for h in hist] == ["add", "update", "delete", "restore"]
    empty = run("--store", store, "--user-id", "nobody", "list")
    assert empty.stdout == "No memories in this scope.\n"
    wrong = run("--store", store, "--user-id", "nobody", "delete", short)
    assert wrong.returncode == 2 and "error: id" in wrong.stderr


def test_offline_update_builds_the_queue_and_summarize_per_scope(tmp_path: Path) -> None:
    store = str(tmp_path / "cli.db")
    run("--store", store, "--user-id", "maya", "add", str(FIXTURES / "conversation.json"))
    out = run("--store", store, "--user-id", "maya", "offline-update", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert 0 < report["queued"] <= 19 and report["pairs"] >= 0  # each entry with earlier ones
    text = run("--store", store, "--user-id", "maya", "offline-update", "--score-threshold", "0.99")
    queued = report["queued"]
    assert text.stdout.startswith(f"Queued {queued} memories with their nearest neighbours;")
    summ = run("--store", store, "--user-id", "maya", "summarize", "--window", "30d")
    assert summ.returncode == 0, summ.stderr
    first, *lines = summ.stdout.splitlines()
    assert re.fullmatch(r"\d+ time windows: \d+ summaries written, 0 updated\.", first)
    assert lines and all("(window)" in ln and MEMORY_LINE.fullmatch(ln) for ln in lines)
    redo = json.loads(
        run("--store", store, "--user-id", "maya", "summarize", "--window", "30d", "--json").stdout
    )
    assert redo["created"] == [] and redo["windows"] == len(lines)  # nothing written twice


def test_add_jsonl_from_stdin(tmp_path: Path) -> None:
    lines = "\n".join(json.dumps({"content": f"fact number {i}"}) for i in range(3))
    out = run("--store", str(tmp_path / "s.db"), "add", "-", "--json", stdin=lines)
    assert out.returncode == 0 and json.loads(out.stdout)["messages"] == 3


def test_errors_are_clean(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    # once as a real process: the entry point turns the error into exit code 2 and stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightmem.cli.main",
            "--store",
            str(tmp_path / "s.db"),
            "add",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "error: file" in proc.stderr and not proc.stdout
    out = run("--store", str(tmp_path / "s.db"), "add", str(bad))
    assert out.returncode == 2 and "error: file" in out.stderr
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"content": "I live in Porto."}]))
    assert run("--store", str(tmp_path / "s.db"), "add", str(good)).returncode == 0
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


def _commands() -> list[str]:
    """The CLI's subcommands, as its parser knows them."""
    subparsers = _parser()._subparsers
    assert subparsers is not None
    choices = subparsers._group_actions[0].choices
    assert choices is not None
    return sorted(choices)


@pytest.mark.parametrize("command", _commands())
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


def test_bench_locomo_llm_path_with_qa_against_the_stub(monkeypatch: pytest.MonkeyPatch) -> None:
    from lightmem.testing import OpenAIStubServer, ScriptedLLM

    with OpenAIStubServer(chat_handler=ScriptedLLM()) as stub:
        monkeypatch.setenv("LIGHTMEM_LLM_BASE_URL", stub.base_url)
        monkeypatch.setenv("LIGHTMEM_LLM_MODEL", "stub")
        monkeypatch.setenv("LIGHTMEM_LLM_API_KEY", "k")
        out = run(
            "bench",
            "locomo",
            str(FIXTURES / "locomo_tiny.json"),
            "--llm",
            "--qa",
            "--budget-tokens",
            "200",
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
    commands = (
        ["search", "x"],
        ["list"],
        ["show", "e1"],
        ["history", "e1"],
        ["update", "e1", "new text"],
        ["delete", "e1"],
        ["restore", "e1"],
        ["offline-update"],
        ["summarize"],
        ["stats"],
    )
    for command in commands:
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


def test_a_superseded_memory_shows_what_replaced_it(tmp_path: Path) -> None:
    """``offline-update`` counts supersessions; ``list`` marks the older memory with the
    date it stopped holding and ``show`` names what replaced it."""
    store = str(tmp_path / "cli.db")
    turns = tmp_path / "turns.json"
    said = [("I live in Boston.", "2024-01-05"), ("We moved to Denver.", "2024-06-09")]
    turns.write_text(
        json.dumps([{"content": c, "speaker_name": "Maya", "timestamp": t} for c, t in said])
    )
    run("--store", store, "add", str(turns))
    text = run("--store", store, "offline-update").stdout
    assert text.rstrip().endswith("1 superseded."), text
    listed = run("--store", store, "list").stdout
    boston = next(ln for ln in listed.splitlines() if "Boston" in ln)
    assert "I live in Boston. (until 9 June 2024)" in boston
    assert "(until" not in next(ln for ln in listed.splitlines() if "Denver" in ln)
    shown = run("--store", store, "show", boston.rsplit("[", 1)[1].rstrip("]")).stdout
    assert re.search(r"superseded by: +[0-9a-f]{32} \(until 9 June 2024\)", shown), shown


def test_a_store_of_several_users_is_read_whole_with_all_scopes(tmp_path: Path) -> None:
    """The refusal names the command line's options, and ``--all-scopes`` exists."""
    store = str(tmp_path / "cli.db")
    for user, text in (("maya", "My knee hurts."), ("leo", "My knee is fine.")):
        turn = tmp_path / f"{user}.json"
        turn.write_text(json.dumps([{"content": text, "speaker_name": user}]))
        assert run("--store", store, "--user-id", user, "add", str(turn)).returncode == 0
    refused = run("--store", store, "search", "knee")
    assert refused.returncode == 2
    assert "give --user-id to read one user's" in refused.stderr
    assert "or --all-scopes to read every user's" in refused.stderr
    found = run("--store", store, "search", "knee", "--all-scopes").stdout
    assert "My knee hurts." in found and "My knee is fine." in found
    listed = run("--store", store, "list", "--all-scopes").stdout
    assert "My knee hurts." in listed and "My knee is fine." in listed
