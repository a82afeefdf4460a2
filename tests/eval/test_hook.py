"""The training hook: a held-out subset evaluated every N steps, pass@1 logged with the step's metrics."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentgspo.eval.agents import ShippedSolutionAgent, load_renderer
from agentgspo.eval.hook import EvalHook
from agentgspo.training.metrics import MetricsLogger, read_metrics


def test_the_hook_evaluates_every_n_steps_and_logs_pass_at_1(tmp_path):
    hook = EvalHook(tmp_path / "eval", problems=None, held_out=["9000A", "9000C"], every=2)
    renderer = load_renderer("tiny")
    logger = MetricsLogger(tmp_path / "run", {"lr": 1.0})
    try:
        for step in range(1, 5):
            # A stand-in for the trained policy, right on problem A and wrong on C: pass@1 must be 1/2.
            metrics = {"loss": 0.0, **(hook(step, _Mixed(hook.tasks, renderer)) or {})}
            logger.log(step, metrics)
    finally:
        logger.close()
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    logged = {row["step"]: row.get("eval/pass@1") for row in rows}
    assert logged == {1: None, 2: 0.5, 3: None, 4: 0.5}
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == ["step_000002", "step_000004"]
    assert all(row.get("eval/judge_error_rate", 0.0) == 0.0 for row in rows)


class _Mixed:
    """Submits the reference on 9000A and a wrong program on everything else."""

    logprob_semantics = "none"

    def __init__(self, tasks, renderer):
        self.renderer = renderer
        self.end_of_turn_id = renderer.end_of_turn_id
        self.good = ShippedSolutionAgent("reference", tasks, renderer)
        self.bad = ShippedSolutionAgent("wrong", tasks, renderer)

    async def sample(self, request):
        statement = next(m["content"] for m in request.messages if m["role"] == "user")
        agent = self.good if "Two Numbers" in statement else self.bad
        return await agent.sample(request)


@pytest.mark.slow
def test_the_hook_runs_a_real_policy_backend(tmp_path):
    from agentgspo.core.sampling import SamplingParams
    from agentgspo.policy.hf import HFPolicy
    from agentgspo.rollouts.rollout import RolloutConfig

    policy = HFPolicy.from_pretrained("tiny")
    config = RolloutConfig(max_turns=1, max_context=4096, sampling=SamplingParams(max_new_tokens=16))
    hook = EvalHook(tmp_path, problems=None, held_out=["9000D"], every=1, samples=2, ks=(1, 2), config=config)
    metrics = hook(1, policy)
    assert metrics["eval/pass@1"] == 0.0 and metrics["eval/pass@2"] == 0.0


def test_bad_hook_settings_are_errors():
    with pytest.raises(ValueError, match="every"):
        EvalHook("x", problems=None, every=0)
    with pytest.raises(ValueError, match="samples >= 5"):
        EvalHook("x", problems=None, ks=(5,))
    with pytest.raises(ValueError, match="no problem 'nope'"):
        EvalHook("x", problems=None, held_out=["nope"])


def test_the_hook_samples_on_the_loop_its_run_argument_gives(tmp_path):
    # Under asynchronous training the backend belongs to the producer's loop (another thread): the training loop
    # passes run=producer.run, and every turn of the evaluation is sampled there, not on a loop of its own.
    producer = asyncio.new_event_loop()
    thread = threading.Thread(target=producer.run_forever, name="producer", daemon=True)
    thread.start()
    hook = EvalHook(tmp_path, problems=None, held_out=["9000A", "9000C"], every=1)
    policy = _Recording(hook.tasks, load_renderer("tiny"))
    try:
        metrics = hook(1, policy, run=lambda coroutine: asyncio.run_coroutine_threadsafe(coroutine, producer).result())
    finally:
        producer.call_soon_threadsafe(producer.stop)
        thread.join(timeout=60)
        producer.close()
    assert metrics["eval/pass@1"] == 0.5
    assert policy.loops == {(producer, "producer")}  # every turn, on the producer's loop and thread


class _Recording(_Mixed):
    """``_Mixed`` that notes the event loop and thread of each turn."""

    def __init__(self, tasks, renderer):
        super().__init__(tasks, renderer)
        self.loops = set()

    async def sample(self, request):
        self.loops.add((asyncio.get_running_loop(), threading.current_thread().name))
        return await super().sample(request)
