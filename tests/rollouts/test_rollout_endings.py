"""How episodes end (issue 19): rewards kept when the runner cuts an episode (``on_truncation``), the three time
limits (one env call, the env budget, one sampler call), sampler failures, mid-episode end-of-text, the sampling
record, and ``summarize`` over the trained population. Every ending's meaning comes from ``trajectory.ENDINGS``."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agentgspo.environments.env import Action, ChatEnv, EnvInfrastructureError
from agentgspo.core.sampling import SampledTurn, SamplingParams
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize
from agentgspo.core.trajectory import ENDINGS, Trajectory


class Tally(ChatEnv):
    """Scores at the end only: each turn adds 0.25 to a hidden score; "done" ends the episode and pays it all. A cut
    episode is paid through ``on_truncation`` (the hook a custom env with a final-only score writes)."""

    cuts: list[str] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.score = 0.0
        return [{"role": "user", "content": "talk"}], {}

    def respond(self, action: Action):
        self.score += 0.25
        if action.text == "done":
            return [], self.score, True, False, {}
        return [{"role": "user", "content": "Again."}], 0.0, False, False, {}

    def on_truncation(self, reason):
        Tally.cuts.append(reason)
        return self.score


def runner(renderer, make_env, policy, **config):
    config.setdefault("group_size", 1)
    return RolloutRunner(make_env, policy, renderer, RolloutConfig(**config), env_id="test")


def scripted(renderer, text="hello"):
    return ScriptedPolicy(lambda messages: text, renderer)


# ------------------------------------------------------------------------------------------- A. on_truncation


def test_a_custom_env_scored_at_the_end_is_paid_when_the_runner_cuts_it(renderer):
    Tally.cuts = []
    (t,) = runner(renderer, Tally, scripted(renderer), max_turns=3).run_sync([0])
    assert t.stop_reason == "max_turns" and Tally.cuts == ["max_turns"]
    assert t.reward == 0.75 and t.turn_rewards == [0.0, 0.0, 0.75]  # the cut's reward on the last turn
    assert sum(t.turn_rewards) == t.reward  # what the learner's per-turn credit checks


def test_on_truncation_pays_a_turn_cut_at_max_new_tokens(renderer):
    Tally.cuts = []
    (t,) = runner(
        renderer, Tally, scripted(renderer, "a long answer " * 20), sampling=SamplingParams(max_new_tokens=4)
    ).run_sync([0])
    assert t.stop_reason == "max_tokens" and Tally.cuts == ["max_tokens"]
    assert t.reward == 0.0 and t.turn_rewards == [0.0]  # no step consumed the turn: nothing earned


def test_on_truncation_is_not_called_when_the_env_ends_the_episode_or_fails(renderer):
    Tally.cuts = []
    (t,) = runner(renderer, Tally, scripted(renderer, "done"), max_turns=3).run_sync([0])
    assert (t.stop_reason, t.reward) == ("completed", 0.25)

    class Raises(Tally):
        def respond(self, action):
            raise RuntimeError("broken env")

    (t,) = runner(renderer, Raises, scripted(renderer), max_turns=3).run_sync([0])
    assert t.stop_reason == "env_error" and Tally.cuts == []


def test_on_truncation_that_returns_no_number_is_an_env_error(renderer):
    class Broken(Tally):
        def on_truncation(self, reason):
            return None

    (t,) = runner(renderer, Broken, scripted(renderer), max_turns=1).run_sync([0])
    assert t.stop_reason == "env_error" and "expected a finite float, got None" in t.metadata["error"]


def test_split_turns_samples_carry_the_cut_reward_on_the_last_turn(renderer):
    samples = runner(renderer, Tally, scripted(renderer), max_turns=2, history="split_turns").run_sync([0])
    assert [s.turn_rewards for s in samples] == [[0.0], [0.5]] and {s.reward for s in samples} == {0.5}


# ------------------------------------------------------------------------------------------- B. time limits


class SlowSampler(ScriptedPolicy):
    """A scripted policy whose every turn takes ``seconds`` at the sampler (awaited: other episodes go on)."""

    def __init__(self, renderer, seconds, text="hello"):
        super().__init__(lambda messages: text, renderer)
        self.seconds = seconds

    async def sample(self, request):
        await asyncio.sleep(self.seconds)
        return await super().sample(request)


def test_time_waiting_for_the_sampler_does_not_spend_the_env_budget(renderer):
    # The old episode_timeout_s counted time queued at the sampler: these episodes ended as "deadline".
    started = time.monotonic()
    trajectories = runner(
        renderer, Tally, SlowSampler(renderer, 0.5), group_size=2, max_turns=2, env_budget_s=0.2, sampler_timeout_s=30
    ).run_sync([0])
    assert time.monotonic() - started >= 1.0  # the sampler took 5x the env budget
    assert [t.stop_reason for t in trajectories] == ["max_turns"] * 2
    assert all(t.metadata["env_seconds"] < 0.2 for t in trajectories)
    print("slow sampler:", summarize(trajectories))


RELEASE_HUNG = threading.Event()


class HangsInStep(Tally):
    def respond(self, action):
        RELEASE_HUNG.wait()  # hangs until the test releases it (Python cannot kill the thread)
        return super().respond(action)


def test_a_hung_env_call_is_env_timeout_and_not_trained(renderer):
    RELEASE_HUNG.clear()
    try:
        trajectories = runner(renderer, HangsInStep, scripted(renderer), group_size=2, env_call_timeout_s=0.5).run_sync(
            [0]
        )
    finally:
        RELEASE_HUNG.set()
    assert [t.stop_reason for t in trajectories] == ["env_timeout"] * 2
    assert "env_call_timeout_s=0.5" in trajectories[0].metadata["error"]
    assert not ENDINGS["env_timeout"].trained and ENDINGS["env_timeout"].requeue
    summary = summarize(trajectories)
    assert summary["trained_episodes"] == 0 and summary["excluded_frac"] == 1.0
    print("hung env call:", summary)


class SlowStep(Tally):
    """Each step takes ``STEP_SECONDS`` and pays 0.1 as it is earned (nothing is owed at a cut)."""

    STEP_SECONDS = 0.3

    def respond(self, action):
        time.sleep(self.STEP_SECONDS)
        return [{"role": "user", "content": "Again."}], 0.1, False, False, {}

    def on_truncation(self, reason):
        Tally.cuts.append(reason)
        return 0.0


def test_a_call_queued_for_a_free_worker_is_not_timed_until_it_runs(renderer):
    # One worker, four episodes: a step waits up to 0.9 s for the worker, but runs 0.3 s (< the 0.6 s limit).
    trajectories = runner(
        renderer, SlowStep, scripted(renderer), group_size=4, max_turns=1, env_workers=1, env_call_timeout_s=0.6
    ).run_sync([0])
    assert [t.stop_reason for t in trajectories] == ["max_turns"] * 4


def test_an_episode_that_spends_its_env_budget_is_env_budget_keeps_its_reward_and_is_trained(renderer):
    Tally.cuts = []
    SlowStep.STEP_SECONDS = 0.6
    try:
        trajectories = runner(
            renderer, SlowStep, scripted(renderer), group_size=2, max_turns=10, env_budget_s=1.0
        ).run_sync([0])
    finally:
        SlowStep.STEP_SECONDS = 0.3
    assert [(t.stop_reason, t.num_turns) for t in trajectories] == [("env_budget", 2)] * 2
    # the step that spent the budget keeps its reward; on_truncation("env_budget") is called once per episode
    assert [t.turn_rewards for t in trajectories] == [[0.1, 0.1]] * 2 and Tally.cuts == ["env_budget"] * 2
    assert [t.reward for t in trajectories] == pytest.approx([0.2, 0.2]) and ENDINGS["env_budget"].trained
    summary = summarize(trajectories)
    assert summary["trained_episodes"] == 2 and summary["reward_mean"] == pytest.approx(0.2)
    print("env budget spent:", summary)


def test_the_env_budget_counts_making_the_env_and_is_checked_before_the_first_turn(renderer):
    # What an EnvBudget wrapper cannot see (it times reset and step only): why the runner keeps its own TimeBudget.
    Tally.cuts = []

    def slow_make():
        time.sleep(0.3)
        return Tally()

    (t,) = runner(renderer, slow_make, scripted(renderer), max_turns=3, env_budget_s=0.2).run_sync([0])
    assert (t.stop_reason, t.num_turns, t.reward) == ("env_budget", 0, 0.0) and t.metadata["env_seconds"] >= 0.3
    assert Tally.cuts == []  # an episode without a turn is not paid for a cut


def test_the_removed_episode_timeout_names_the_three_limits():
    with pytest.raises(TypeError, match="env_call_timeout_s.*env_budget_s.*sampler_timeout_s"):
        RolloutConfig(episode_timeout_s=300)


@pytest.mark.parametrize("limit", ["env_call_timeout_s", "env_budget_s", "sampler_timeout_s"])
def test_time_limits_are_positive_or_none(limit):
    assert getattr(RolloutConfig(**{limit: None}), limit) is None
    with pytest.raises(ValueError, match=f"{limit}: expected > 0 or None"):
        RolloutConfig(**{limit: 0})


# ------------------------------------------------------------------------------------------- C. sampler failures


class FailingSampler:
    """A backend that raises (an engine error) or never answers."""

    logprob_semantics = "full"

    def __init__(self, renderer, hang=False):
        self.end_of_turn_id, self.hang = renderer.end_of_turn_id, hang

    async def sample(self, request):
        if self.hang:
            await asyncio.Event().wait()
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


def test_a_sampler_that_raises_is_sampler_error_not_env_error(renderer):
    (t,) = runner(renderer, Tally, FailingSampler(renderer)).run_sync([0])
    assert t.stop_reason == "sampler_error" and "illegal memory access" in t.metadata["error"]
    assert "RuntimeError" in t.metadata["traceback"] and not ENDINGS["sampler_error"].trained


def test_a_sampler_call_past_its_limit_is_sampler_error(renderer):
    (t,) = runner(renderer, Tally, FailingSampler(renderer, hang=True), sampler_timeout_s=0.3).run_sync([0])
    assert t.stop_reason == "sampler_error" and "sampler_timeout_s=0.3" in t.metadata["error"]


class BrokenKernelSampler(ScriptedPolicy):
    """Answers like a scripted policy, with log-prob -0.5 per id, but its first turn's second id gets ``bad`` (what
    vLLM returns from a broken attention kernel): the backend's own output, the input under test."""

    def __init__(self, renderer, bad):
        super().__init__(lambda messages: "hello", renderer)
        self.bad, self.calls = bad, 0
        self.logprob_semantics = "full"

    async def sample(self, request):
        turn = await super().sample(request)
        turn.logprobs = [-0.5] * len(turn.token_ids)
        self.calls += 1
        if self.calls == 1:
            turn.logprobs[1] = self.bad
        return turn


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_sampler_logprob_is_sampler_error_naming_the_backend(renderer, bad):
    """One NaN / inf / -inf log-prob of a sampled id (-inf too: a sampled id had probability > 0) ends that episode
    as sampler_error (not trained, re-queueable) with the backend and the position named; the group's other
    episodes play on and record only finite log-probs."""
    trajectories = runner(renderer, Tally, BrokenKernelSampler(renderer, bad), group_size=3, max_turns=2).run_sync([0])
    failed = [t for t in trajectories if t.stop_reason == "sampler_error"]
    assert len(failed) == 1, [t.stop_reason for t in trajectories]
    error = failed[0].metadata["error"]
    assert "BrokenKernelSampler" in error and repr(bad) in error and "token 1" in error
    assert failed[0].num_turns == 0  # the broken turn is not recorded
    others = [t for t in trajectories if t is not failed[0]]
    assert [t.stop_reason for t in others] == ["max_turns", "max_turns"]
    assert all(lp == -0.5 for t in others for lp, m in zip(t.sampler_logprobs, t.loss_mask) if m)


def test_summarize_reports_reward_and_success_over_the_trained_episodes_only():
    def episode(reason, reward):
        return Trajectory(stop_reason=reason, reward=reward)

    batch = [
        episode("completed", 1.0),
        episode("max_turns", 0.0),
        episode("sampler_error", 0.0),
        episode("env_timeout", 0.0),
    ]
    summary = summarize(batch)
    assert (summary["reward_mean"], summary["success"], summary["trained_episodes"]) == (0.5, 0.5, 2)
    assert summary["excluded_frac"] == 0.5
    assert summary["stop_frac"] == {"completed": 0.25, "max_turns": 0.25, "sampler_error": 0.25, "env_timeout": 0.25}
    assert summary["stop_reasons"] == {"completed": 1, "max_turns": 1, "sampler_error": 1, "env_timeout": 1}
    none_trained = summarize([episode("env_error", 0.0)])
    assert (none_trained["trained_episodes"], none_trained["reward_mean"], none_trained["success"]) == (0, 0.0, 0.0)


# ------------------------------------------------------------------------------------------- D. end-of-text


class EndsWithEndOfText(ScriptedPolicy):
    """Scripted turns that stop on ``<|endoftext|>`` (a backend's other stop id) instead of end-of-turn."""

    def __init__(self, renderer, text):
        super().__init__(lambda messages: text, renderer)
        self.end_of_text_id = renderer.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        assert self.end_of_text_id != self.end_of_turn_id
        self.stop_ids = frozenset({self.end_of_turn_id, self.end_of_text_id})

    async def sample(self, request):
        turn = await super().sample(request)
        return SampledTurn(turn.token_ids[:-1] + [self.end_of_text_id], turn.logprobs, turn.finish_reason)


def test_a_mid_episode_end_of_text_ends_the_episode_after_the_env_steps_it(renderer):
    # Before: the next env reply was appended after <|endoftext|>, a context the chat template never renders.
    Tally.cuts = []
    (t,) = runner(renderer, Tally, EndsWithEndOfText(renderer, "hello"), max_turns=4).run_sync([0])
    assert (t.stop_reason, t.num_turns) == ("end_of_text", 1) and Tally.cuts == ["end_of_text"]
    assert t.reward == 0.25 and t.token_ids[-1] == renderer.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert ENDINGS["end_of_text"].trained and ENDINGS["end_of_text"].counted


def test_an_end_of_text_last_turn_is_end_of_text_not_max_turns(renderer):
    # The runner's cuts after a step go env_budget, end_of_text, max_turns: why it does not wrap its envs in
    # MaxTurns, which would cut this turn inside the step as max_turns and pay on_truncation("max_turns").
    Tally.cuts = []
    (t,) = runner(renderer, Tally, EndsWithEndOfText(renderer, "hello"), max_turns=1).run_sync([0])
    assert (t.stop_reason, t.num_turns) == ("end_of_text", 1) and Tally.cuts == ["end_of_text"]
    assert t.reward == 0.25 and t.turn_rewards == [0.25]


def test_an_end_of_text_answer_the_env_accepts_is_completed(renderer):
    (t,) = runner(renderer, Tally, EndsWithEndOfText(renderer, "done"), max_turns=4).run_sync([0])
    assert (t.stop_reason, t.reward) == ("completed", 0.25)


# ------------------------------------------------------------------------------------------- E. sampling record


class Recording(ScriptedPolicy):
    def __init__(self, renderer):
        super().__init__(lambda messages: "hello", renderer)
        self.logprob_semantics, self.params = "truncated", []  # as a vLLM backend's

    async def sample(self, request):
        self.params.append(request.params)
        return await super().sample(request)


@pytest.mark.parametrize("history", ["as_sampled", "split_turns"])
def test_every_trajectory_records_how_it_was_sampled(renderer, history):
    policy = Recording(renderer)
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=10_000, top_k=5)
    trajectories = runner(
        renderer, Tally, policy, max_turns=2, max_context=4096, sampling=sampling, history=history
    ).run_sync([0])
    assert [t.sampling for t in trajectories] == [
        {"temperature": 0.7, "top_p": 0.9, "top_k": 5, "logprobs": "truncated"}
    ] * len(trajectories)
    # max_new_tokens cut to the room left in the context; the other parameters kept
    assert [(p.max_new_tokens < 10_000, p.top_k, p.top_p) for p in policy.params] == [(True, 5, 0.9)] * 2


# ------------------------------------------------------------------------------- infrastructure: re-queued episodes


class FlakyHost(ChatEnv):
    """Its host dies (EnvInfrastructureError) on the first ``fails`` attempts of each seed (one sample per seed),
    then plays: "done" pays 1.0."""

    fails = 1
    attempts: dict[int, int] = {}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        FlakyHost.attempts[seed] = FlakyHost.attempts.get(seed, 0) + 1
        if FlakyHost.attempts[seed] <= FlakyHost.fails:
            raise EnvInfrastructureError(f"host of seed {seed} went away")
        return [{"role": "user", "content": "say done"}], {}

    def respond(self, action: Action):
        return [], 1.0, True, False, {}


@pytest.mark.parametrize(
    "requeue_limit, fails, ending", [(0, 1, "infra_error"), (2, 1, "completed"), (2, 3, "infra_error")]
)
def test_episodes_lost_to_infrastructure_are_requeued_up_to_the_limit(renderer, requeue_limit, fails, ending):
    FlakyHost.fails, FlakyHost.attempts = fails, {}
    trajectories = runner(renderer, FlakyHost, scripted(renderer, "done"), requeue_limit=requeue_limit)
    trajectories = trajectories.run_sync([0, 1])
    assert [t.stop_reason for t in trajectories] == [ending] * 2
    assert not ENDINGS["infra_error"].trained and ENDINGS["infra_error"].requeue
    played = min(fails, requeue_limit) + 1  # the lost attempts, then the one that stands
    assert FlakyHost.attempts == {0: played, 1: played}
    lost = [t.metadata.get("requeued", []) for t in trajectories]
    assert all(len(x) == min(fails, requeue_limit) for x in lost)
    assert all(entry.startswith("infra_error: EnvInfrastructureError: host of seed") for x in lost for entry in x)
    summary = summarize(trajectories)
    assert summary["requeued_episodes"] == (2 if requeue_limit else 0)
    assert summary["trained_episodes"] == (2 if ending == "completed" else 0)
