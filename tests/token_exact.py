"""The token-exact check of a recorded episode, shared by the tests of every path that records one, and the
multi-turn env their sampled episodes play (AgainCalculator)."""

from __future__ import annotations

from agentgspo.environments.env import Action
from agentgspo.envs.calculator import CalculatorEnv


class AgainCalculator(CalculatorEnv):
    """Calculator-v0 that keeps the conversation going: an answer gets "Again." until the third answer."""

    def reset(self, *, seed=None, options=None):
        self.answers = 0
        return super().reset(seed=seed, options=options)

    def respond(self, action: Action):
        self.answers += 1
        messages, reward, terminated, truncated, info = super().respond(action)
        if self.answers < 3:
            return [{"role": "user", "content": "Again."}], 0.0, False, False, info
        return messages, reward, terminated, truncated, info


def rerender(trajectory, renderer, tools):
    """The ids the record must hold, re-derived from its messages and the env's ``tools``: prompt + (sampled turn +
    env continuation)*. Asserts each turn decodes to its message and each continuation is the template's exact one."""
    history = trajectory.messages
    assistant_at = [i for i, m in enumerate(history) if m["role"] == "assistant"]
    ids = renderer.prompt_ids(history[: assistant_at[0]], tools)
    for turn, (at, (start, end)) in enumerate(zip(assistant_at, trajectory.turn_spans)):
        sampled = trajectory.token_ids[start:end]
        finished = sampled[-1] == renderer.end_of_turn_id  # a turn cut at max_new_tokens ends the episode
        assert finished or (turn + 1 == trajectory.num_turns and trajectory.stop_reason == "max_tokens")
        assert renderer.decode(sampled[:-1] if finished else sampled) == history[at]["content"]
        ids = ids + sampled
        if turn + 1 < len(assistant_at):
            continuation, exact = renderer.continuation_ids(
                history[: at + 1], history[at + 1 : assistant_at[turn + 1]], tools
            )
            assert exact
            ids = ids + continuation
    return ids


def assert_token_exact(trajectory, renderer, tools):
    """The record's ids are its rerender, and its loss mask is 1 exactly on the sampled turns."""
    assert trajectory.token_ids == rerender(trajectory, renderer, tools)
    on_turns = {i for start, end in trajectory.turn_spans for i in range(start, end)}
    assert {i for i, m in enumerate(trajectory.loss_mask) if m} == on_turns
