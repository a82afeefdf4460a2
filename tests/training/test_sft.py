"""Demonstrations for the supervised warm start: an (imperfect) demonstrator built from an env's oracle and wrong
policies, and the warm start's effect on the policy."""

from __future__ import annotations

import pytest
import torch

from agentgspo import ChatEnv
from agentgspo.envs.calculator import CalculatorEnv
from agentgspo.training.sft import play_demonstrations, sft_loss, warm_start


def test_mixed_demonstrator_plays_the_oracle_and_the_wrong_policy_in_the_drawn_shares(renderer):
    seeds = list(range(300))
    demos = play_demonstrations(CalculatorEnv, renderer, seeds, wrong_frac=0.6, seed=3)
    assert [d.seed for d in demos] == seeds  # the order of the seeds, whoever played them
    rewards = [d.reward for d in demos]
    assert set(rewards) == {0.0, 1.0}
    assert 0.5 < rewards.count(0.0) / len(rewards) < 0.7  # ~60% played by the wrong policy
    for demo in demos:  # the oracle calls the tool and wins; the wrong policy answers at once and loses
        assert (demo.num_turns == 2) == (demo.reward == 1.0)
    again = play_demonstrations(CalculatorEnv, renderer, seeds, wrong_frac=0.6, seed=3)
    assert [d.reward for d in again] == rewards  # the draw is reproducible from ``seed``
    other = play_demonstrations(CalculatorEnv, renderer, seeds, wrong_frac=0.6, seed=4)
    assert [d.reward for d in other] != rewards


def test_pure_oracle_demonstrations_all_succeed(renderer):
    assert all(d.reward == 1.0 for d in play_demonstrations(CalculatorEnv, renderer, range(20)))


class _OracleOnlyEnv(ChatEnv):
    oracle = staticmethod(lambda messages: "yes")

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": "Say yes."}], {}

    def respond(self, action):
        return [], float(action.text == "yes"), True, False, {}


def test_missing_wrong_policy_and_bad_fraction_are_clear_errors(renderer):
    with pytest.raises(ValueError, match=r"defines no `wrong` policy.*wrong_frac to 0.0"):
        play_demonstrations(_OracleOnlyEnv, renderer, range(10), wrong_frac=0.5, env_id="OracleOnly")
    assert len(play_demonstrations(_OracleOnlyEnv, renderer, range(3))) == 3  # no wrong episodes drawn: fine
    with pytest.raises(ValueError, match=r"wrong_frac must be in \[0, 1\], got 1.5"):
        play_demonstrations(CalculatorEnv, renderer, range(3), wrong_frac=1.5)


def test_warm_start_lowers_the_demonstrations_loss(tiny_path, renderer, tokenizer):
    from transformers import AutoModelForCausalLM

    demos = play_demonstrations(CalculatorEnv, renderer, range(32))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    with torch.no_grad():
        before = sft_loss(model, demos, tokenizer.pad_token_id).item()
    losses = warm_start(model, demos, pad_token_id=tokenizer.pad_token_id, steps=15, batch_size=16, lr=3e-3)
    with torch.no_grad():
        after = sft_loss(model, demos, tokenizer.pad_token_id).item()
    assert len(losses) == 15 and after < 0.7 * before
