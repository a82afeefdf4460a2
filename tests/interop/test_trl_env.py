"""TRL's environment_factory: a registered env as TRL's class, played by a real GRPOTrainer step and by the oracles.

TRL 1.16.0 and transformers 5.19 run for real: the trainer samples the tiny MoE, parses its tool calls with the tiny
tokenizer's response template, calls the class's tool methods and scores the rollouts with ``trl_reward``.
"""

from __future__ import annotations

import copy
import os

import pytest

import agentgspo
from agentgspo.environments.env import Action, ChatEnv
from agentgspo.environments.interop.trl_env import trl_environment, trl_reward, trl_reward_function
from agentgspo.environments.tools import Tool
from agentgspo.core.trajectory import ENDINGS

pytest.importorskip("trl", reason="the trl extra is not installed: pip install 'agentgspo[trl]'")


# ----------------------------------------------------------------------------------------------- helpers


def _tool_call_message(action: Action) -> dict:
    """The assistant message TRL's parser makes of a turn with tool calls."""
    calls = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in action.tool_calls]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def play(instance, policy, *, max_turns: int = 6, **row) -> tuple[float, list[dict]]:
    """One episode through the class as TRL plays it: reset(**row), each tool call a method call, the final answer
    (the first turn without tool calls, or "Done." once the env ended the episode) through ``trl_reward``."""
    instance.reset(**row)
    completion: list[dict] = []
    for _ in range(max_turns):
        text = "Done." if instance.episode.ended else policy(instance.episode.messages)
        action = Action.from_text(text)
        if not action.tool_calls:
            completion.append({"role": "assistant", "content": text})
            break
        completion.append(_tool_call_message(action))
        for call in action.tool_calls:
            content = getattr(instance, call.name)(**call.arguments)
            completion.append({"role": "tool", "name": call.name, "content": content})
    (reward,) = trl_reward(completions=[completion], environments=[instance])
    return reward, completion


def _local_sandbox_or_skip() -> None:
    from agentgspo.sandboxes import SandboxUnavailable, get_sandbox

    try:
        get_sandbox("local")
    except SandboxUnavailable as exc:
        pytest.skip(f"CodeForces-v0 needs the local judge sandbox (bubblewrap): {exc}")


def note(text: str) -> str:
    """Write a note.

    Args:
        text: what to note.
    """
    return "noted"


class ChattyEnv(ChatEnv):
    """Replies to every answer with a user turn (never ends) and pays 0.5 on truncation, naming the reason."""

    def __init__(self, tools=(note,), **kwargs):
        super().__init__(tools=tools, **kwargs)
        self.truncations: list[str] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.truncations = []
        return [{"role": "user", "content": "Say something."}], {}

    def respond(self, action):
        return [{"role": "user", "content": "And?"}], 0.25, False, False, {}

    def on_truncation(self, reason):
        self.truncations.append(reason)
        return 0.5


agentgspo.register("trltest/Chatty-v0", entry_point=ChattyEnv)


class EndingEnv(ChatEnv):
    """Ends the episode with the stop reason it was made with and pays 1.0: at the first answer, or (``in_tool``)
    inside the first tool call, as CodeForces-v0 ends one after ``max_judge_errors``."""

    def __init__(self, ending: str = "completed", in_tool: bool = False, **kwargs):
        super().__init__(tools=(note,), **kwargs)
        self.ending, self.in_tool = ending, in_tool

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": "Say something."}], {}

    def step(self, action):
        messages, reward, terminated, truncated, info = super().step(action)
        if self.in_tool and not terminated:
            return messages, 1.0, True, False, {**info, "stop_reason": self.ending}
        return messages, reward, terminated, truncated, info

    def respond(self, action):
        return [], 1.0, True, False, {"stop_reason": self.ending}


agentgspo.register("trltest/Ending-v0", entry_point=EndingEnv)


# ----------------------------------------------------------------------------------------------- the tokenizer


def test_tiny_tokenizer_parses_the_tool_calls_its_template_renders(tokenizer):
    """TRL finds tool calls with ``parse_response``: the tiny tokenizer (loaded from its saved folder) has a response
    template that reads its own template's ``tool_calls`` back, our ``<tool_call>`` text, ``<think>`` and content."""
    from trl.chat_template_utils import parse_response

    calls = [
        {"type": "function", "function": {"name": "calculate", "arguments": {"expression": "347*29+18"}}},
        {"type": "function", "function": {"name": "submit", "arguments": {"code": 'print("<a>")', "lang": "c"}}},
    ]
    user = [{"role": "user", "content": "What is 347*29+18?"}]
    prompt = tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=True, return_dict=False)
    rendered = tokenizer.apply_chat_template(
        [*user, {"role": "assistant", "content": "", "tool_calls": calls}], tokenize=True, return_dict=False
    )
    assert rendered[: len(prompt)] == prompt
    parsed = parse_response(tokenizer, rendered[len(prompt) :], prefix=prompt)
    assert parsed["tool_calls"] == calls and parsed["content"] == ""

    from agentgspo.environments.tool_calls import ToolCall

    sampled = "<think>use the tool</think>Let me compute." + ToolCall("calculate", {"expression": "2*3"}).to_text()
    ids = tokenizer(sampled + "<|im_end|>", add_special_tokens=False)["input_ids"]
    parsed = parse_response(tokenizer, ids, prefix=prompt)
    assert parsed["reasoning_content"] == "use the tool" and parsed["content"] == "Let me compute."
    assert parsed["tool_calls"] == [
        {"type": "function", "function": {"name": "calculate", "arguments": {"expression": "2*3"}}}
    ]
    answer = tokenizer("<answer>6</answer><|im_end|>", add_special_tokens=False)["input_ids"]
    assert parse_response(tokenizer, answer, prefix=prompt) == {"role": "assistant", "content": "<answer>6</answer>"}


# ----------------------------------------------------------------------------------------------- the class


def _reduced(schema: dict) -> dict:
    """What both schema builders state: name, description, parameter types and descriptions, required ones."""
    function = schema["function"]
    properties = function["parameters"].get("properties", {})
    return {
        "name": function["name"],
        "description": function["description"],
        "properties": {k: (v.get("type"), v.get("description")) for k, v in properties.items()},
        "required": sorted(function["parameters"].get("required", [])),
    }


@pytest.mark.parametrize("env_id", ["agentgspo/Calculator-v0", "agentgspo/CodeForces-v0"])
def test_tool_methods_show_the_model_the_env_tool_schemas(env_id):
    """TRL lists the class's public functions as tools and shows each through get_json_schema: they are exactly
    reset and the env's tools, with the schemas our runner shows (less pydantic's defaults and additionalProperties)."""
    import inspect

    from transformers.utils import get_json_schema

    if env_id.endswith("CodeForces-v0"):
        _local_sandbox_or_skip()
    cls = trl_environment(env_id)
    instance = cls()
    schemas = instance.env.unwrapped.tool_schemas
    public = {name for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction) if not name.startswith("_")}
    assert public == {"reset", *(s["function"]["name"] for s in schemas)}
    for schema in schemas:
        method = getattr(instance, schema["function"]["name"])
        assert _reduced(get_json_schema(method)) == _reduced(schema)


def test_calculator_oracle_scores_one_and_a_wrong_answer_zero_through_the_factory():
    cls = trl_environment("agentgspo/Calculator-v0")
    env = cls()
    for seed in range(3):
        gold, completion = play(env, env.env.unwrapped.oracle, seed=seed)
        assert gold == 1.0 and env.episode.tool_calls == 1 and env.episode.stop_reason == "completed", completion
        assert completion[1]["content"] == str(env.env.unwrapped.target)  # the tool message TRL appends
        bad, _ = play(env, env.env.unwrapped.wrong, seed=seed)
        assert bad == 0.0


def test_codeforces_oracle_scores_one_and_a_wrong_program_zero_through_the_factory():
    """The oracle runs the samples, then submits (AC ends the episode inside the tool call: the final answer is not
    stepped again); a wrong program uses up the one submission env_kwargs allow."""
    _local_sandbox_or_skip()
    oracle = trl_environment("agentgspo/CodeForces-v0")()
    for seed in (0, 1):
        gold, completion = play(oracle, oracle.env.unwrapped.oracle, seed=seed)
        assert gold == 1.0 and oracle.episode.tool_calls == 2, completion
        assert completion[1]["content"].startswith("Examples: AC") and "AC" in completion[3]["content"]
        assert oracle.episode.messages[-1]["role"] == "tool"  # "Done." was not played
    wrong = trl_environment("agentgspo/CodeForces-v0", max_submissions=1)()
    bad, completion = play(wrong, wrong.env.unwrapped.wrong, seed=0)
    assert bad == 0.0 and wrong.episode.ended and wrong.episode.tool_calls == 1, completion
    assert "Error: the episode has ended" in wrong.submit(code="print(1)")  # no step after the end


def test_the_row_seed_picks_the_task_and_a_row_without_one_is_refused():
    cls = trl_environment("agentgspo/Calculator-v0", system_prompt=None)
    first, second = cls(), cls()  # TRL's G rollouts of a row: one instance each
    assert first.reset(prompt=[], seed=7) == second.reset(prompt=[], seed=7) != first.reset(prompt=[], seed=8)
    with pytest.raises(ValueError, match="has no 'seed'.*Add a seed column"):
        first.reset(prompt=[{"role": "user", "content": ""}])
    with pytest.raises(ValueError, match="'seed' must be an int, got '7'"):
        first.reset(seed="7")
    assert first.reset(options={"index": None}, seed=7) == second.reset(seed=7)  # Arrow's None-filled keys dropped


def test_wrong_arguments_reach_the_env_which_penalises_them():
    env = trl_environment("agentgspo/Calculator-v0", tool_error_policy="penalise")()
    env.reset(seed=0)
    assert env.calculate(expr="1+1").startswith("Error: invalid arguments for calculate")  # not a Python TypeError
    assert env.calculate("2+2") == "4"  # positional, as a Python caller might
    assert dict(env.episode.tool_errors) == {"invalid_arguments": 1}
    (reward,) = trl_reward(completions=[[{"role": "assistant", "content": "no"}]], environments=[env])
    assert reward == pytest.approx(-0.1)


def test_rollouts_trl_cut_pay_on_truncation_once():
    """Our runner's endings for the rollouts TRL ends: an env that wants another turn after the final answer, a
    rollout that ends on unexecuted tool calls, and (with the stop ids) a last turn cut by max_completion_length,
    which is not stepped."""
    cls = trl_environment("trltest/Chatty-v0")
    env = cls()
    env.reset(seed=0)
    answer = [{"role": "assistant", "content": "hello"}]
    assert trl_reward(completions=[answer], environments=[env]) == [0.75]  # 0.25 for the answer, 0.5 at the cut
    assert trl_reward(completions=[answer], environments=[env]) == [0.75]  # scored once
    assert env.env.unwrapped.truncations == ["max_turns"] and env.episode.stop_reason == "max_turns"

    env.reset(seed=0)
    pending = [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "note"}}]}]
    assert trl_reward(completions=[pending], environments=[env]) == [0.5]
    assert env.env.unwrapped.truncations == ["max_turns"]

    cut_reward = trl_reward_function(stop_token_ids=[2, 0])
    env.reset(seed=0)
    assert cut_reward(completions=[answer], environments=[env], completion_ids=[[5, 6, 7]]) == [0.5]
    assert env.env.unwrapped.truncations == ["max_tokens"] and len(env.episode.messages) == 1  # answer not stepped
    env.reset(seed=0)
    assert cut_reward(completions=[answer], environments=[env], completion_ids=[[5, 6, 2]]) == [0.75]
    assert cut_reward(completions=[answer], environments=[object()], completion_ids=[[2]]) == [None]  # not ours


def test_an_env_that_raises_in_a_tool_call_stops_the_reward_path():
    """TRL turns the exception into a tool error the model reads; the reward path must not score the episode."""

    def explode(text: str) -> str:
        """Fail.

        Args:
            text: anything.
        """
        raise OSError("disk gone")

    env = trl_environment("trltest/Chatty-v0", tools=[Tool(explode)])()
    env.reset(seed=0)
    assert "raised OSError: disk gone" in env.explode(text="x")  # a tool's own failure is an observation
    env.env.unwrapped.step = lambda action: 1 / 0  # a bug in the env itself
    with pytest.raises(ZeroDivisionError):
        env.explode(text="x")
    assert env.episode.stop_reason == "env_error"
    with pytest.raises(RuntimeError, match="(?s)raised in a tool call.*ZeroDivisionError"):
        trl_reward(completions=[[{"role": "assistant", "content": "ok"}]], environments=[env])


@pytest.mark.parametrize("stop_reason", list(ENDINGS))
def test_only_endings_the_table_trains_and_counts_are_scored(stop_reason):
    """Every row of ENDINGS, as the env's own ending: an ending our runner does not train or count (judge_error,
    env_timeout, ...) is not the model's doing, so trl_reward returns TRL's "not scored" (None), not the 1.0 the env
    paid; its stop reason still reaches TRL's completions table. Ended at the final answer and inside a tool call."""
    ending = ENDINGS[stop_reason]
    expected = 1.0 if ending.trained and ending.counted else None
    logged = {}
    env = trl_environment("trltest/Ending-v0", ending=stop_reason)()
    env.reset(seed=0)
    answer = [{"role": "assistant", "content": "done"}]
    log_extra = lambda column, values: logged.setdefault(column, values)  # noqa: E731 -- TRL's log_extra(column, values)
    assert trl_reward(completions=[answer], environments=[env], log_extra=log_extra) == [expected]
    assert logged == {"stop_reason": [stop_reason]} and env.episode.ended and env.episode.reward == 1.0

    env = trl_environment("trltest/Ending-v0", ending=stop_reason, in_tool=True)()
    env.reset(seed=0)
    assert env.note(text="x") == "noted" and env.episode.stop_reason == stop_reason
    assert trl_reward(completions=[answer], environments=[env]) == [expected]
    assert len(env.episode.messages) == 3  # the answer was not stepped: the env had ended the episode


def _named(name: str):
    return Tool(note, name=name)


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        (_named("reset"), "'reset' cannot become a method.*TRL calls reset\\(\\) itself.*name='call_reset'"),
        (_named("my-tool"), "'my-tool' cannot become a method.*not a Python identifier.*name='my_tool'"),
        (_named("episode"), "'episode' cannot become a method.*already has 'episode'"),
        (_named("_hidden"), "'_hidden' cannot become a method.*starts with '_'"),
    ],
)
def test_tools_that_cannot_become_methods_are_refused_with_the_fix(tool, message):
    with pytest.raises(ValueError, match=message):
        trl_environment("trltest/Chatty-v0", tools=[tool])


def test_a_tool_parameter_without_a_description_is_refused():
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    with pytest.raises(ValueError, match="no description for its parameter 'text'.*under 'Args:'"):
        trl_environment("trltest/Chatty-v0", tools=[shout])


class ForeignToolsEnv(ChattyEnv):
    """An env whose tools are schemas only (as a remote OpenEnv's or a verifiers env's): no Python functions."""

    def __init__(self):
        super().__init__(tools=())
        del self.toolset

    @property
    def tool_schemas(self):
        return [{"type": "function", "function": {"name": "remote_tool", "parameters": {"type": "object"}}}]


agentgspo.register("trltest/ForeignTools-v0", entry_point=ForeignToolsEnv)


def test_an_env_whose_tools_are_not_functions_is_refused():
    with pytest.raises(ValueError, match="has tool_schemas but no Python tools.*TRL can only offer methods"):
        trl_environment("trltest/ForeignTools-v0")


# ----------------------------------------------------------------------------------------------- a GRPO step


@pytest.mark.slow
def test_grpo_trainer_takes_an_optimizer_step_on_calculator(tmp_path):
    """One GRPOTrainer step on the tiny MoE, briefly warm-started on Calculator-v0 oracle turns so that it writes
    tool calls. Sampling at temperature 1.5 mixes well-formed calls with malformed ones, which the env penalises
    (tool_error_policy="penalise"), so the groups' rewards differ; with no router aux loss and no weight decay, only
    the env's rewards can move the parameters."""
    import torch

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # measured on the shared 2-core machine: 0.08 s per warm-start step, 1.2 s with 2 threads
    try:
        _grpo_step_on_calculator(tmp_path)
    finally:
        torch.set_num_threads(threads)


def _grpo_step_on_calculator(tmp_path):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from agentgspo.envs.calculator import CalculatorEnv
    from agentgspo.models.tiny import build_tiny_policy
    from agentgspo.core.chat import ChatRenderer
    from agentgspo.training.sft import play_demonstrations, warm_start

    path = build_tiny_policy(tmp_path / "policy", hidden_size=64, num_layers=1)
    tokenizer = AutoTokenizer.from_pretrained(path)
    make_env = lambda: CalculatorEnv(system_prompt=None)  # noqa: E731
    demos = play_demonstrations(make_env, ChatRenderer(tokenizer), range(64), env_id="agentgspo/Calculator-v0")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    warm_start(model, demos, pad_token_id=tokenizer.pad_token_id, steps=60, batch_size=16, lr=1e-2)

    played = []
    cls = trl_environment("agentgspo/Calculator-v0", system_prompt=None, tool_error_policy="penalise")

    def factory():
        played.append(cls())
        return played[-1]

    rows = Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * 2, "seed": [0, 1]})
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=16,
        num_generations=8,
        max_completion_length=64,
        temperature=1.5,
        max_steps=1,
        learning_rate=1e-3,
        router_aux_loss_coef=0.0,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    reward = trl_reward_function([tokenizer.eos_token_id, tokenizer.pad_token_id])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=rows,
        processing_class=tokenizer,
        environment_factory=factory,
    )
    before = copy.deepcopy(model.state_dict())
    try:
        trainer.train()
    finally:
        # accelerate's state is a process-wide singleton: TRL's Trainer set bf16 mixed precision in it (its CPU
        # default), which every later Accelerator() of the suite would inherit (learner numbers off by ~1e-3).
        from accelerate.state import AcceleratorState, GradientState

        AcceleratorState._reset_state(True)
        GradientState._reset_state()

    log = trainer.state.log_history[0]
    assert trainer.state.global_step == 1
    assert torch.isfinite(torch.tensor(log["loss"])) and log["reward_std"] > 0, log
    assert log["tools/call_frequency"] > 0
    episodes = [env.episode for env in played if env.episode.messages]
    assert len(episodes) == 16 and all(episode.ended for episode in episodes)
    assert sum(episode.tool_calls for episode in episodes) > 0
    assert len({round(episode.reward, 6) for episode in episodes}) > 1  # the env's scores, as TRL got them
    changed = [name for name, value in model.state_dict().items() if not torch.equal(value, before[name])]
    assert changed, "the optimizer step left every parameter unchanged"
