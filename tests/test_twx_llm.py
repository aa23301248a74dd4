"""The LLM policy of the TextWorldExpress bench: a model chooses each action from the
valid ones, shown the memory FluxMem gave; its calls are in the ledger. Played against a
scripted model on a loopback stub server, in a game without the engine, and (where the
engine is installed) through ``lightmem bench fluxmem --env twx --llm``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import pytest

from inprocess_cli import run
from lightmem.bench.twx_env import Game, Turn, TWXWorld
from lightmem.bench.twx_llm import LLMPlayer, build, parse_action
from lightmem.errors import ConfigError
from lightmem.llm import OpenAIChatClient
from lightmem.llm.base import InvalidReply
from lightmem.testing import OpenAIStubServer, ScriptedLLM
from test_fluxmem_skills import require_twx


class Vault(TWXWorld):
    """Three levers, one opens the vault (the task is complete); the others do nothing."""

    LEVERS = ("pull red lever", "pull green lever", "pull blue lever")

    def __init__(self) -> None:  # no engine: nothing to start
        self.game = Game("vault", 0, "Open the vault.", "", [])

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.game = Game(name, seed, "Open the vault.", "Three levers.", list(self.LEVERS), [])
        return self.game

    def step(self, action: str) -> Turn:
        g = self.game
        g.done = g.success = action == "pull blue lever"
        g.valid = [a for a in g.valid if a != action]
        feedback = "The task is complete." if g.done else ""
        return Turn("Clunk.", g.valid, 1.0 if g.done else 0.0, g.done, False, feedback)


@pytest.fixture
def stub() -> Iterator[tuple[OpenAIStubServer, list[list[dict[str, Any]]]]]:
    prompts: list[list[dict[str, Any]]] = []
    script = ScriptedLLM()

    def handler(messages: list[dict[str, Any]]) -> str:
        prompts.append(messages)
        return script(messages)

    with OpenAIStubServer(chat_handler=handler) as server:
        yield server, prompts


def test_the_model_chooses_each_action_shown_the_memory(
    stub: tuple[OpenAIStubServer, list[list[dict[str, Any]]]],
) -> None:
    server, prompts = stub
    client = OpenAIChatClient("stub", base_url=server.base_url, api_key="k")
    player = LLMPlayer(Vault(), 10, client)
    # Without memory the scripted model takes the first lever not yet pulled.
    blind = player.play("vault", {}, 0, "test", "")
    assert blind.success and blind.actions == Vault.LEVERS
    # A memory naming the blue lever: pulled first.
    recalled = player.play("vault", {}, 0, "test", "Last time: pull blue lever. It opened.")
    assert recalled.success and recalled.actions == ("pull blue lever",)
    data = json.loads(prompts[-1][1]["content"].split("<data>")[1].split("</data>")[0])
    assert "pull blue lever" in data["memory"] and data["valid"][2] == "2: pull blue lever"
    calls = {r.op: r.calls for r in client.ledger.totals() if r.kind == "llm"}
    assert calls == {"twx.act": 4}  # one call per step


def test_an_answer_outside_the_valid_actions_is_refused() -> None:
    assert parse_action({"action": 1}, 2) == 1
    for bad in ({"action": 2}, {"action": True}, {"action": "1"}, [1], {}):
        with pytest.raises(InvalidReply, match="action"):
            parse_action(bad, 2)


def test_a_long_memory_is_cut_to_fit_the_models_context(
    stub: tuple[OpenAIStubServer, list[list[dict[str, Any]]]],
) -> None:
    server, prompts = stub
    client = OpenAIChatClient("stub", base_url=server.base_url, api_key="k", context_tokens=1024)
    memory = "filler words " * 5_000 + "pull blue lever"
    assert not client.fits(build("Open the vault.", memory, [], Vault.LEVERS), None)
    result = LLMPlayer(Vault(), 10, client).play("vault", {}, 0, "test", memory)
    assert result.success
    sent = prompts[0][1]["content"]
    assert len(sent) < len(memory) and all(lever in sent for lever in Vault.LEVERS)
    cuts = {r.op: r.items for r in client.ledger.totals() if r.op.endswith(".cut")}
    assert cuts == {"twx.act.cut": len(prompts)}  # the memory, cut in every step's prompt


class EchoingVault(Vault):
    """A vault whose every lever answers with a long echo: the steps outgrow the context."""

    def step(self, action: str) -> Turn:
        return replace(super().step(action), observation="Clunk, clunk. " * 60)


def test_the_oldest_steps_left_out_of_the_prompt_are_counted_as_cut(
    stub: tuple[OpenAIStubServer, list[list[dict[str, Any]]]],
) -> None:
    server, prompts = stub
    client = OpenAIChatClient("stub", base_url=server.base_url, api_key="k", context_tokens=1024)
    result = LLMPlayer(EchoingVault(), 10, client).play("vault", {}, 0, "test", "")
    assert result.actions == Vault.LEVERS
    shown = [
        len(json.loads(p[1]["content"].split("<data>")[1].split("</data>")[0])["steps"])
        for p in prompts
    ]
    left_out = sum(step - n for step, n in enumerate(shown))
    assert left_out > 0
    cuts = {r.op: r.items for r in client.ledger.totals() if r.op.endswith(".cut")}
    assert cuts == {"twx.act.cut": left_out}


def test_twx_bench_with_an_llm_policy_counts_its_calls(
    stub: tuple[OpenAIStubServer, list[list[dict[str, Any]]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    require_twx()
    server, prompts = stub
    monkeypatch.setenv("LIGHTMEM_LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("LIGHTMEM_LLM_MODEL", "stub")
    monkeypatch.setenv("LIGHTMEM_LLM_API_KEY", "k")
    proc = run(
        *("bench", "fluxmem", "--env", "twx", "--llm"),
        *("--games", "coin", "--param", "coin:numLocations=2", "--seeds", "1"),
        *("--train", "2", "--test", "2", "--rounds", "1"),
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["policy"] == "llm:openai:stub"
    calls = out["games"]["coin"]["llm_calls"]
    assert all(n > 0 for n in calls.values()), calls  # the model played every arm
    acts = [p for p in prompts if '{"action": <the number' in p[0]["content"]]
    assert len(acts) <= sum(calls.values())


def test_a_step_without_a_usable_answer_is_spent_not_fatal() -> None:
    answers = iter(["no json here", *[json.dumps({"action": 0})] * 5])
    with OpenAIStubServer(chat_handler=lambda _messages: next(answers)) as server:
        client = OpenAIChatClient("stub", base_url=server.base_url, api_key="k", json_repairs=0)
        result = LLMPlayer(Vault(), 3, client).play("vault", {}, 0, "test", "")
    # the lost turn counts against the limit of 3: two levers pulled, the blue one not
    assert result.actions == Vault.LEVERS[:2] and not result.success
    assert result.feedback == "The task was not completed in 3 steps (score 0.00)."
    unusable = {r.op: r.items for r in client.ledger.totals() if r.op.endswith(".unusable")}
    assert unusable == {"twx.act.unusable": 1}


def test_a_context_too_small_for_the_valid_actions_is_a_config_error(
    stub: tuple[OpenAIStubServer, list[list[dict[str, Any]]]],
) -> None:
    server, prompts = stub
    client = OpenAIChatClient("stub", base_url=server.base_url, api_key="k", context_tokens=200)
    with pytest.raises(ConfigError, match="context_tokens"):
        LLMPlayer(Vault(), 10, client).play("vault", {}, 0, "test", "memory " * 100)
    assert prompts == []  # nothing sent with the valid actions cut


def test_an_attempt_ends_after_unusable_answers_in_a_row() -> None:
    # One unusable step, a usable one (the count starts again), then nothing usable.
    answers = iter(["no json", json.dumps({"action": 0}), *["still no json"] * 20])
    with OpenAIStubServer(chat_handler=lambda _messages: next(answers)) as server:
        client = OpenAIChatClient("stub", base_url=server.base_url, api_key="k", json_repairs=0)
        result = LLMPlayer(Vault(), 20, client, give_up_after=3).play("vault", {}, 0, "test", "")
    assert result.actions == Vault.LEVERS[:1] and not result.success
    assert result.feedback == (
        "The attempt ended after 5 steps: the model gave no usable answer for 3 steps in a "
        "row (score 0.00)."
    )
    unusable = {r.op: r.items for r in client.ledger.totals() if r.op.endswith(".unusable")}
    assert unusable == {"twx.act.unusable": 4}  # not asked again for the 15 steps left
    with pytest.raises(ConfigError, match="give_up_after"):
        LLMPlayer(Vault(), 20, client, give_up_after=0)
