"""The rollout runner: every env failure becomes a stop reason, the batch always finishes. Scripted policies keep
these tests instant; the token-exact tests with a sampled policy are in test_token_exact.py."""

from __future__ import annotations

import asyncio
import copy
import threading
import time

import pytest

from agentgspo.environments.env import Action, ChatEnv
from agentgspo.envs.calculator import CalculatorEnv, calculator_oracle
from agentgspo.core.sampling import PolicyConfigurationError, SampledTurn, SamplingParams
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.core.chat import ChatRenderer
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize
from agentgspo.core.trajectory import read_jsonl, write_jsonl
from agentgspo.environments.wrappers import EnvBudget, MaxTurns, TimeBudget, TurnLimit
from chat_support import counting_renders  # tests/chat_support.py


def run(renderer, make_env, policy=calculator_oracle, seeds=(0,), **config):
    config.setdefault("group_size", 1)
    config.setdefault("env_call_timeout_s", 30)
    runner = RolloutRunner(make_env, ScriptedPolicy(policy, renderer), renderer, RolloutConfig(**config), env_id="test")
    return runner.run_sync(list(seeds))


class ResetRaises(CalculatorEnv):
    def reset(self, *, seed=None, options=None):
        raise RuntimeError("the dataset row is missing")


class StepRaises(CalculatorEnv):
    def step(self, action):
        raise RuntimeError("the verifier fell over")


RELEASE_HUNG_STEPS = threading.Event()


class StepHangsOnEvenSeeds(CalculatorEnv):
    def reset(self, *, seed=None, options=None):
        self.hang = seed % 2 == 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self.hang:
            RELEASE_HUNG_STEPS.wait()  # hangs until the test releases it (Python cannot kill the thread)
        return super().step(action)


RELEASE_SLOW_MAKE = threading.Event()
CLOSED: list = []


class RecordsClose(CalculatorEnv):
    def close(self):
        CLOSED.append(self)
        super().close()


def make_after_release():
    RELEASE_SLOW_MAKE.wait()  # the env arrives after the make call's timeout
    return RecordsClose()


class Again(ChatEnv):
    """Never ends by itself: every answer gets "Again."."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": "talk"}], {}

    def respond(self, action: Action):
        return [{"role": "user", "content": "Again."}], 0.0, False, False, {}


def test_oracle_batch_completes_with_reward_one_and_ordered_groups(renderer):
    trajectories = run(renderer, CalculatorEnv, seeds=(3, 4), group_size=3)
    assert [(t.seed, t.group_id, t.sample_id) for t in trajectories] == [
        (3, 0, 0),
        (3, 0, 1),
        (3, 0, 2),
        (4, 1, 0),
        (4, 1, 1),
        (4, 1, 2),
    ]
    assert all(t.stop_reason == "completed" and t.reward == 1.0 and t.num_turns == 2 for t in trajectories)
    assert all(t.matches_full_render and t.env_id == "test" for t in trajectories)
    summary = summarize(trajectories)
    assert summary["success"] == 1.0 and summary["stop_reasons"] == {"completed": 6}


def test_env_step_that_raises_is_env_error_with_the_traceback(renderer):
    (t,) = run(renderer, StepRaises)
    assert t.stop_reason == "env_error"
    assert t.metadata["error"] == "RuntimeError: the verifier fell over"
    assert "Traceback" in t.metadata["traceback"] and "in step" in t.metadata["traceback"]
    assert t.num_turns == 1  # the sampled turn is kept


def test_env_that_cannot_be_made_is_env_error(renderer):
    def broken_factory():
        raise ImportError("no module named verifier")

    (t,) = run(renderer, broken_factory)
    assert t.stop_reason == "env_error" and "no module named verifier" in t.metadata["error"]
    assert t.token_ids == [] and t.matches_full_render is None


def test_env_whose_reset_raises_is_env_error_and_the_batch_finishes(renderer):
    trajectories = run(renderer, ResetRaises, seeds=(0, 1))
    assert [t.stop_reason for t in trajectories] == ["env_error"] * 2
    assert all(t.metadata["error"] == "RuntimeError: the dataset row is missing" for t in trajectories)
    assert all(t.token_ids == [] and t.matches_full_render is None for t in trajectories)


def test_hung_step_hits_the_call_timeout_and_the_rest_of_the_batch_finishes(renderer):
    RELEASE_HUNG_STEPS.clear()
    started = time.monotonic()
    try:
        trajectories = run(renderer, StepHangsOnEvenSeeds, seeds=(0, 1, 2), group_size=2, env_call_timeout_s=1)
    finally:
        RELEASE_HUNG_STEPS.set()
    elapsed = time.monotonic() - started
    assert [t.stop_reason for t in trajectories if t.seed != 1] == ["env_timeout"] * 4
    assert [(t.stop_reason, t.reward) for t in trajectories if t.seed == 1] == [("completed", 1.0)] * 2
    assert elapsed < 10


def test_worker_threads_of_hung_calls_exit_once_the_calls_return(renderer):
    before = set(threading.enumerate())
    RELEASE_HUNG_STEPS.clear()
    try:
        run(renderer, StepHangsOnEvenSeeds, seeds=(0, 1, 2), group_size=2, env_call_timeout_s=1, env_workers=4)
    finally:
        RELEASE_HUNG_STEPS.set()
    give_up = time.monotonic() + 10
    while time.monotonic() < give_up:
        left = [t for t in set(threading.enumerate()) - before if t.name == "agentgspo-env" and t.is_alive()]
        if not left:
            break
        time.sleep(0.05)
    assert left == []  # no worker waits forever on the finished batch's queue


def test_env_made_after_the_call_timeout_is_closed_when_it_arrives(renderer):
    RELEASE_SLOW_MAKE.clear()
    CLOSED.clear()
    try:
        (t,) = run(renderer, make_after_release, env_call_timeout_s=0.5)
    finally:
        RELEASE_SLOW_MAKE.set()
    assert t.stop_reason == "env_timeout" and t.token_ids == []
    give_up = time.monotonic() + 10
    while not CLOSED and time.monotonic() < give_up:
        time.sleep(0.05)
    assert len(CLOSED) == 1  # its sandboxes or containers are released, not leaked


class AnswersSeedTimes(Again):
    """Ends after ``seed`` answers."""

    def reset(self, *, seed=None, options=None):
        self.left = seed
        return super().reset(seed=seed, options=options)

    def respond(self, action: Action):
        self.left -= 1
        return [{"role": "user", "content": "Again."}], 0.0, self.left == 0, False, {}


def test_two_concurrent_runs_of_one_runner_both_finish(renderer):
    import asyncio

    runner = RolloutRunner(
        AnswersSeedTimes,
        ScriptedPolicy(lambda messages: "hi", renderer),
        renderer,
        RolloutConfig(group_size=2, max_turns=8, env_call_timeout_s=3, env_workers=2),
    )

    async def both():
        return await asyncio.gather(runner.run([1]), runner.run([6]))

    short, long = asyncio.run(both())
    assert [(t.stop_reason, t.num_turns) for t in short + long] == [("completed", 1)] * 2 + [("completed", 6)] * 2


def test_prompt_longer_than_the_context_is_context_overflow(renderer):
    (t,) = run(renderer, CalculatorEnv, max_context=10)
    assert t.stop_reason == "context_overflow" and t.num_turns == 0 and len(t.token_ids) >= 10


def test_turn_that_runs_into_the_context_limit_is_context_overflow(renderer):
    env = CalculatorEnv()
    messages, _ = env.reset(seed=0)
    prompt = len(renderer.prompt_ids(messages, env.tool_schemas))
    (t,) = run(renderer, CalculatorEnv, max_context=prompt + 5)
    assert t.stop_reason == "context_overflow"
    assert len(t.token_ids) == prompt + 5 and t.turn_spans == [(prompt, prompt + 5)]


def test_env_reply_that_does_not_fit_is_context_overflow(renderer):
    env = CalculatorEnv()
    messages, _ = env.reset(seed=0)
    prompt = len(renderer.prompt_ids(messages, env.tool_schemas))
    first_turn = len(renderer.encode(calculator_oracle(messages))) + 1
    (t,) = run(renderer, CalculatorEnv, max_context=prompt + first_turn + 3)
    assert t.stop_reason == "context_overflow" and t.num_turns == 1
    assert len(t.token_ids) == prompt + first_turn  # the reply was not appended


class _Refusing:
    """A backend that answers as an API does: no room for the prompt ("context"), or a refused setup."""

    logprob_semantics = "none"

    def __init__(self, renderer, refusal):
        self.end_of_turn_id, self.refusal = renderer.end_of_turn_id, refusal

    async def sample(self, request):
        if self.refusal == "context":
            return SampledTurn(token_ids=[], logprobs=[], finish_reason="context")
        raise PolicyConfigurationError("the endpoint refused the API key: set OPENAI_API_KEY")


def test_a_backend_without_room_for_the_prompt_ends_the_episode_as_context_overflow(renderer):
    runner = RolloutRunner(CalculatorEnv, _Refusing(renderer, "context"), renderer, RolloutConfig(group_size=1))
    (t,) = runner.run_sync([0])
    assert t.stop_reason == "context_overflow" and t.num_turns == 0 and sum(t.loss_mask) == 0


def test_a_backend_configuration_error_stops_the_batch_instead_of_becoming_env_errors(renderer):
    runner = RolloutRunner(CalculatorEnv, _Refusing(renderer, "key"), renderer, RolloutConfig(group_size=2))
    with pytest.raises(PolicyConfigurationError, match="OPENAI_API_KEY"):
        runner.run_sync([0, 1])


def test_turn_hitting_max_new_tokens_is_max_tokens(renderer):
    (t,) = run(renderer, CalculatorEnv, sampling=SamplingParams(max_new_tokens=5))
    assert t.stop_reason == "max_tokens" and t.turn_spans[0][1] - t.turn_spans[0][0] == 5
    assert renderer.end_of_turn_id not in t.token_ids[t.turn_spans[0][0] :]


def test_max_turns_of_the_runner(renderer):
    (t,) = run(renderer, Again, policy=lambda messages: "hello", max_turns=3)
    assert t.stop_reason == "max_turns" and t.num_turns == 3
    assert [m["content"] for m in t.messages if m["role"] == "user"] == ["talk", "Again.", "Again.", "Again."]


def test_max_turns_of_a_wrapper(renderer):
    (t,) = run(renderer, lambda: MaxTurns(Again(), max_turns=2), policy=lambda messages: "hello", max_turns=8)
    assert t.stop_reason == "max_turns" and t.num_turns == 2


def test_a_wrapper_and_the_runner_cutting_at_the_same_turn_pay_on_truncation_once(renderer):
    cuts = []

    class PaidAtTheCut(Again):
        def on_truncation(self, reason):
            cuts.append(reason)
            return 0.5

    # both limits are reached at turn 2: the wrapper's cut is the env's own ending, the runner adds nothing
    (t,) = run(renderer, lambda: MaxTurns(PaidAtTheCut(), max_turns=2), policy=lambda messages: "hello", max_turns=2)
    assert (t.stop_reason, t.num_turns) == ("max_turns", 2) and cuts == ["max_turns"]
    assert t.reward == 0.5 and t.turn_rewards == [0.0, 0.5]


def test_the_runners_limits_are_the_wrappers_rules_not_a_copy(renderer, monkeypatch):
    # A rule changed in agentgspo.environments.wrappers changes the runner's limit and the wrapper's alike.
    monkeypatch.setattr(TurnLimit, "reached", property(lambda limit: limit.turns >= 1))
    (t,) = run(renderer, Again, policy=lambda messages: "hello", max_turns=3)
    assert (t.stop_reason, t.num_turns) == ("max_turns", 1)
    wrapped = MaxTurns(Again(), max_turns=3)
    wrapped.reset(seed=0)
    assert wrapped.step("hello")[4]["stop_reason"] == "max_turns"

    monkeypatch.setattr(TimeBudget, "spent_out", property(lambda budget: budget.seconds is not None))
    (t,) = run(renderer, Again, policy=lambda messages: "hello", max_turns=3, env_budget_s=1000)
    assert (t.stop_reason, t.num_turns) == ("env_budget", 0)
    wrapped = EnvBudget(Again(), seconds=1000)
    wrapped.reset(seed=0)
    assert wrapped.step("hello")[4]["stop_reason"] == "env_budget"


def test_parse_error_ends_the_episode(renderer):
    (t,) = run(renderer, lambda: CalculatorEnv(max_parse_errors=1), policy=lambda m: "<tool_call>{oops</tool_call>")
    assert t.stop_reason == "parse_error" and t.num_turns == 1
    assert t.metadata["tool_errors"] == {"parse_error": 1}
    assert t.messages[-1]["role"] == "tool" and t.messages[-1]["content"].startswith("Error: could not parse")


@pytest.mark.parametrize("bad", [{"group_size": 0}, {"max_context": 0}, {"env_call_timeout_s": 0}])
def test_config_is_checked_at_construction(bad):
    with pytest.raises(ValueError, match="expected"):
        RolloutConfig(**bad)


class UpdatedMidTurn(ScriptedPolicy):
    """Reports its first turn as the in-process vLLM engine reports a weight update after the turn's first id:
    version 0, then 1 (``SampledTurn.version_boundaries``); later turns are all version 1."""

    async def sample(self, request):
        turn = await super().sample(request)
        first = len(request.messages) == 1  # only the user's question so far
        turn.policy_version = 0 if first else 1
        if first:
            turn.policy_version_end, turn.version_boundaries = 1, [(0, 0), (1, 1)]
        return turn


def test_the_record_keeps_where_the_version_changed_inside_a_turn(renderer, tmp_path):
    """What the sampler knew about versions goes into the record: each sampled id's version is rebuilt from it."""
    policy = UpdatedMidTurn(lambda messages: "again", renderer)
    runner = RolloutRunner(Again, policy, renderer, RolloutConfig(group_size=1, max_turns=2), env_id="test")
    (t,) = runner.run_sync([0])
    write_jsonl([t], tmp_path / "t.jsonl")
    (loaded,) = read_jsonl(tmp_path / "t.jsonl")
    assert loaded.turn_version_boundaries == [[(0, 0), (1, 1)], None]
    (start, end), (start2, end2) = loaded.turn_spans
    versions = loaded.token_versions()
    assert versions[start:end] == [0] + [1] * (end - start - 1) and versions[start2:end2] == [1] * (end2 - start2)
    assert versions[:start] == [None] * start  # the prompt: no policy sampled it


# --------------------------------------------------------------- framework overhead per step (issue 46, item 5)


def test_an_episode_renders_each_history_once(tokenizer):
    # Before: four renders for a two-turn episode: the prompt, the continuation's re-render of the prompt the turn
    # was sampled after, the continuation, and the full-render check's own render of what the continuation rendered.
    renderer = ChatRenderer(counting_renders(tokenizer), caching=False)
    config = RolloutConfig(group_size=1)
    (t,) = RolloutRunner(CalculatorEnv, ScriptedPolicy(calculator_oracle, renderer), renderer, config).run_sync([0])
    assert t.num_turns == 2 and t.reward == 1.0 and t.matches_full_render is True
    assert renderer.tokenizer.renders == 2  # the prompt, then the history after the tool's reply


def test_a_group_of_identical_episodes_renders_once(tokenizer):
    # The G episodes of a group share their prompt; the oracle also plays the same turns in each.
    renderer = ChatRenderer(counting_renders(tokenizer))
    config = RolloutConfig(group_size=8)
    trajectories = RolloutRunner(CalculatorEnv, ScriptedPolicy(calculator_oracle, renderer), renderer, config).run_sync(
        [0]
    )
    assert len({tuple(t.token_ids) for t in trajectories}) == 1 and all(t.reward == 1.0 for t in trajectories)
    assert renderer.tokenizer.renders == 2


class SpelledOut(ScriptedPolicy):
    """Samples its text one character per id: the same text, but ids the tokenizer would not produce for it (it has
    one id for ``<tool_call>``, ``calculate``, ...). A model can sample such ids; the learner then trains on ids that
    no render of the conversation tokenizes to: the drift the full-render check reports."""

    async def sample(self, request):
        text = self.fn(list(request.messages))
        ids = [i for character in text for i in self.renderer.encode(character)] + [self.end_of_turn_id]
        return SampledTurn(token_ids=ids, logprobs=[0.0] * len(ids), finish_reason="stop")


def test_the_full_render_check_catches_ids_the_tokenizer_would_not_produce(renderer):
    runner = RolloutRunner(
        CalculatorEnv, SpelledOut(calculator_oracle, renderer), renderer, RolloutConfig(group_size=2)
    )
    drifted = runner.run_sync([0])
    assert all(t.reward == 1.0 and t.num_turns == 2 for t in drifted)  # the env read the same text
    assert all(t.matches_full_render is False for t in drifted)
    assert summarize(drifted)["matches_full_render"] == 0.0
    (exact,) = run(renderer, CalculatorEnv)  # the same turns, tokenized as the tokenizer does
    assert exact.messages == drifted[0].messages and exact.matches_full_render is True


def test_the_full_render_check_catches_a_template_that_rewrites_history(tokenizer):
    from chat_support import THINK_STRIPPING_TEMPLATE  # drops earlier <think> blocks, as Qwen3's does

    stripping = copy.deepcopy(tokenizer)
    stripping.chat_template = THINK_STRIPPING_TEMPLATE
    renderer = ChatRenderer(stripping)
    policy = ScriptedPolicy(lambda messages: "<think>\nhm\n</think>\n\nb", renderer)
    (t,) = RolloutRunner(Again, policy, renderer, RolloutConfig(group_size=1, max_turns=3)).run_sync([0])
    assert t.num_turns == 3 and t.metadata["template_fallbacks"] == 2
    assert t.matches_full_render is False


def test_env_calls_that_finish_together_wake_the_event_loop_once(renderer):
    # Before: each env call woke the loop twice (its start, for the per-call clock, and its result through a
    # concurrent.futures.Future); now workers queue results for the loop and wake it only when no wake-up is pending.
    runner = RolloutRunner(
        CalculatorEnv, ScriptedPolicy(calculator_oracle, renderer), renderer, RolloutConfig(group_size=8)
    )
    wakeups = []

    async def play():
        loop = asyncio.get_running_loop()
        wake = loop.call_soon_threadsafe

        def counted(*args, **kwargs):
            wakeups.append(args[0])  # list.append is atomic: the workers call this
            return wake(*args, **kwargs)

        loop.call_soon_threadsafe = counted
        return await runner.run(range(16))

    trajectories = asyncio.run(play())
    assert len(trajectories) == 128 and all(t.reward == 1.0 for t in trajectories)
    env_calls = 128 * 4  # make, reset and two steps per episode (close is not awaited)
    assert 1 <= len(wakeups) <= env_calls
