"""Tools: schemas from type hints and docstrings; every kind of bad call becomes a counted tool message through
``ChatEnv.step``, under each tool-error policy, and never a crash."""

from __future__ import annotations

import asyncio

import pytest

from agentgspo.environments.env import Action, ChatEnv
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner
from agentgspo.environments.tool_calls import ToolCall
from agentgspo.environments.tools import Tool, ToolSet


def add(a: int, b: int = 2) -> int:
    """Add two integers.

    Longer explanation that is not part of the description.

    Args:
        a: the first addend.
        b (int): the second addend.
    """
    return a + b


def explode(reason: str) -> str:
    """A tool that always fails.

    Args:
        reason: what to say when failing.
    """
    raise RuntimeError(f"exploded because {reason}")


async def async_mul(a: int, b: int) -> dict:
    """Multiply two integers, asynchronously.

    Args:
        a: a factor.
        b: another factor.
    """
    await asyncio.sleep(0)
    return {"product": a * b}


class ToolEnv(ChatEnv):
    """Tools only; a turn without tool calls ends the episode with reward 1."""

    def __init__(self, **kwargs):
        super().__init__(tools=[add, explode, async_mul], **kwargs)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": "use the tools"}], {}

    def respond(self, action: Action):
        return [], 1.0, True, False, {}


def call(name: str, **arguments) -> str:
    return ToolCall(name, arguments).to_text()


def step(text: str, **env_kwargs):
    env = ToolEnv(**env_kwargs)
    env.reset(seed=0)
    return env.step(text)


# ----------------------------------------------------------------------------------------------- schemas


def test_schema_comes_from_type_hints_and_docstring_args():
    schema = Tool(add).schema
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "add"
    assert function["description"] == "Add two integers."
    assert function["parameters"]["properties"] == {
        "a": {"type": "integer", "description": "the first addend."},
        "b": {"type": "integer", "description": "the second addend.", "default": 2},
    }
    assert function["parameters"]["required"] == ["a"]


def test_wrapped_argument_descriptions_are_kept_whole():
    def lookup(key: str, limit: int = 3) -> str:
        """Look a key up.

        Args:
            key: the key to look up; a long description wrapped onto
                a second line, with a colon: like this.
            limit (int): at most this many
                results.

        Returns:
            the values.
        """
        return key

    properties = Tool(lookup).schema["function"]["parameters"]["properties"]
    assert properties["key"]["description"] == (
        "the key to look up; a long description wrapped onto a second line, with a colon: like this."
    )
    assert properties["limit"]["description"] == "at most this many results."


def test_env_exposes_schemas_of_all_tools_in_order():
    assert [s["function"]["name"] for s in ToolEnv().tool_schemas] == ["add", "explode", "async_mul"]


def test_bad_tool_definitions_fail_at_construction_with_the_fix():
    def undocumented(x: int) -> int:
        return x

    def unhinted(x):
        """Doc."""

    def star(*args: int):
        """Doc."""

    with pytest.raises(ValueError, match="needs a docstring"):
        Tool(undocumented)
    with pytest.raises(ValueError, match="parameter 'x' needs a type hint"):
        Tool(unhinted)
    with pytest.raises(ValueError, match=r"\*args/\*\*kwargs"):
        Tool(star)
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        ToolSet([add, add])
    with pytest.raises(TypeError, match="a tool must be a function, got int"):
        Tool(3)


def test_long_output_is_truncated_with_a_note():
    def big() -> str:
        """Return a lot."""
        return "x" * 50

    result = Tool(big, max_output_chars=10)({})
    assert result.content.startswith("x" * 10) and "[output truncated to 10 characters]" in result.content


# ------------------------------------------------------------------------- bad input through ChatEnv.step


def test_a_good_call_returns_the_value_and_no_errors():
    messages, reward, terminated, truncated, info = step(call("add", a=2, b=3))
    assert messages == [{"role": "tool", "name": "add", "content": "5"}]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["tool_errors"] == {} and info["tool_calls"] == 1 and "mask_turn" not in info


def test_malformed_json_is_a_parse_error_message():
    messages, reward, terminated, _, info = step("<tool_call>{'name': add}</tool_call>")
    assert len(messages) == 1 and messages[0]["role"] == "tool"
    assert messages[0]["content"].startswith("Error: could not parse the tool call as JSON")
    assert info["tool_errors"] == {"parse_error": 1}
    assert (reward, terminated) == (0.0, False)


def test_unknown_tool_lists_the_available_ones():
    messages, _, _, _, info = step(call("subtract", a=1))
    assert messages[0]["content"] == "Error: unknown tool 'subtract'; available tools: add, explode, async_mul"
    assert info["tool_errors"] == {"unknown_tool": 1}


def test_wrong_argument_types_name_the_argument():
    messages, _, _, _, info = step(call("add", a="three"))
    content = messages[0]["content"]
    assert content.startswith("Error: invalid arguments for add: a:") and "integer" in content
    assert info["tool_errors"] == {"invalid_arguments": 1}


def test_missing_and_extra_arguments_are_invalid():
    messages, _, _, _, info = step(call("add", b=1) + call("add", a=1, c=2))
    assert "a: Field required" in messages[0]["content"] and "c: Extra inputs" in messages[1]["content"]
    assert info["tool_errors"] == {"invalid_arguments": 2}


def test_a_tool_that_raises_becomes_its_error_message():
    messages, _, _, _, info = step(call("explode", reason="testing"))
    assert messages[0]["content"] == "Error: explode raised RuntimeError: exploded because testing"
    assert info["tool_errors"] == {"tool_exception": 1}


def test_an_async_tool_works():
    messages, reward, _, _, info = step(call("async_mul", a=6, b=7))
    assert messages == [{"role": "tool", "name": "async_mul", "content": '{"product": 42}'}]
    assert info["tool_errors"] == {} and reward == 0.0


def test_an_async_tool_works_when_step_is_called_inside_an_event_loop():
    async def main():
        return step(call("async_mul", a=2, b=5))

    messages, *_ = asyncio.run(main())
    assert messages[0]["content"] == '{"product": 10}'


def test_errors_are_counted_by_kind_in_one_turn():
    text = "<tool_call>nope</tool_call>" + call("nope") + call("add", a=1) + call("explode", reason="x")
    messages, *_, info = step(text)
    assert [m["role"] for m in messages] == ["tool"] * 4
    assert info["tool_errors"] == {"parse_error": 1, "unknown_tool": 1, "tool_exception": 1}
    assert info["tool_calls"] == 3


def test_feedback_policy_gives_reward_zero_and_no_mask():
    *_, reward, _, _, info = step(call("nope") + call("explode", reason="x"), tool_error_policy="feedback")
    assert reward == 0.0 and "mask_turn" not in info


def test_penalise_policy_subtracts_the_penalty_per_error():
    _, reward, terminated, _, info = step(
        call("nope") + call("explode", reason="x") + call("add", a=1),
        tool_error_policy="penalise",
        tool_error_penalty=0.25,
    )
    assert reward == pytest.approx(-0.5) and not terminated and "mask_turn" not in info
    _, reward, *_ = step(call("add", a=1), tool_error_policy="penalise")
    assert reward == 0.0  # no error, no penalty


def test_mask_policy_flags_the_turn():
    *_, info = step(call("nope"), tool_error_policy="mask")
    assert info["mask_turn"] is True
    *_, info = step(call("add", a=1), tool_error_policy="mask")
    assert "mask_turn" not in info


def test_mask_policy_zeroes_the_turns_loss_mask_in_the_rollout(renderer):
    def policy(messages):  # turn 0: an unknown tool (masked); turn 1: a good call; turn 2: the answer
        tool_messages = [m for m in messages if m["role"] == "tool"]
        return [call("nope"), call("add", a=1), "done"][len(tool_messages)]

    runner = RolloutRunner(
        lambda: ToolEnv(tool_error_policy="mask"),
        ScriptedPolicy(policy, renderer),
        renderer,
        RolloutConfig(group_size=1, env_call_timeout_s=30),
    )
    (trajectory,) = runner.run_sync([0])
    assert trajectory.stop_reason == "completed" and trajectory.reward == 1.0
    assert trajectory.num_turns == 3
    spans = trajectory.turn_spans
    assert all(trajectory.loss_mask[i] == 0 for i in range(*spans[0]))
    for start, end in spans[1:]:
        assert trajectory.loss_mask[start:end] == [1] * (end - start)
    assert trajectory.num_sampled_tokens == sum(end - start for start, end in spans[1:])
    assert trajectory.metadata["tool_errors"] == {"unknown_tool": 1}


def test_parse_errors_end_the_episode_after_max_parse_errors_in_a_row():
    env = ToolEnv(max_parse_errors=2)
    env.reset(seed=0)
    assert env.step("<tool_call>x</tool_call>")[2] is False
    assert env.step(call("add", a=1))[2] is False  # a parsed turn resets the streak
    assert env.step("<tool_call>x</tool_call>")[2] is False
    _, _, terminated, _, info = env.step("<tool_call>x</tool_call>")
    assert terminated and info["stop_reason"] == "parse_error"


def test_toolsets_do_not_keep_their_envs_alive():
    """Per-env tools (bound methods) share one cached spec, and the cache holds no env: envs are freed."""
    import gc
    import weakref

    class Env:
        def lookup(self, key: str) -> str:
            """Look a key up.

            Args:
                key: what to look up.
            """
            return key

    first, second = Env(), Env()
    tools_a, tools_b = ToolSet([first.lookup]), ToolSet([second.lookup])
    assert tools_a.tools["lookup"].arguments_model is tools_b.tools["lookup"].arguments_model  # built once
    tools_a.schemas[0]["function"]["name"] = "changed"  # callers get copies
    assert tools_b.schemas[0]["function"]["name"] == "lookup"
    alive = weakref.ref(first)
    del first, tools_a
    gc.collect()
    assert alive() is None, "a cached tool kept its env (and the env's sandboxes) alive"
