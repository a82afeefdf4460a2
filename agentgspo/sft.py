"""Supervised warm start: maximise the log-likelihood of the sampled (mask 1) tokens of demonstrations.

Used by the quickstart to imitate a demonstrator before GSPO. Loss = mean over masked tokens of -log p (a token
mean, the usual SFT convention; RL losses live in :mod:`agentgspo.loss`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym
import torch
from transformers import get_scheduler

from agentgspo.batching import collate, score
from agentgspo.chat import ChatRenderer
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.rollout import RolloutConfig, RolloutRunner
from agentgspo.trajectory import Trajectory


def play_demonstrations(make_env: Callable[[], gym.Env], renderer: ChatRenderer, seeds: Iterable[int], *,
                        wrong_frac: float = 0.0, seed: int = 0, env_id: str | None = None) -> list[Trajectory]:
    """Episodes of an (imperfect) demonstrator: the env's ``oracle``, or in a ``wrong_frac`` share of the episodes
    (drawn with ``seed``) its ``wrong`` policy. Returned in the order of ``seeds``.

    Imitating a mixed demonstrator caps the imitation at the oracle's share, so what RL adds beyond it is measurable.
    """
    if not 0.0 <= wrong_frac <= 1.0:
        raise ValueError(f"play_demonstrations: wrong_frac must be in [0, 1], got {wrong_frac}")
    env = make_env().unwrapped
    policies = {"oracle": env.oracle, "wrong": env.wrong}
    seeds = list(seeds)
    draw = random.Random(seed)
    roles = ["wrong" if draw.random() < wrong_frac else "oracle" for _ in seeds]
    played: dict[int, Trajectory] = {}
    for role, policy in policies.items():
        mine = [s for s, r in zip(seeds, roles) if r == role]
        if not mine:
            continue
        if policy is None:
            raise ValueError(f"play_demonstrations: env {env_id or type(env).__name__} defines no `{role}` policy; "
                             f"give it one (a staticmethod from messages to the reply text) or set wrong_frac to "
                             f"{0.0 if role == 'wrong' else 1.0}")
        runner = RolloutRunner(make_env, ScriptedPolicy(policy, renderer), renderer, RolloutConfig(group_size=1),
                               env_id=env_id)
        played.update(zip(mine, runner.run_sync(mine)))
    return [played[s] for s in seeds]


def sft_loss(model: Any, trajectories: Sequence[Trajectory], pad_token_id: int) -> torch.Tensor:
    """Mean negative log-likelihood of the mask-1 tokens of ``trajectories``."""
    batch = collate(trajectories, pad_token_id).to(next(model.parameters()).device)
    logprobs, _ = score(model, batch)  # [B, T]
    masked = torch.where(batch.loss_mask, logprobs, torch.zeros_like(logprobs))  # [B, T]
    return -masked.sum() / batch.loss_mask.sum().clamp(min=1)


def warm_start(model: Any, demonstrations: Sequence[Trajectory], *, pad_token_id: int, steps: int,
               batch_size: int = 64, lr: float = 3e-3, lr_schedule: str = "linear", seed: int = 0,
               callback: Callable[[int, float], bool] | None = None) -> list[float]:
    """Train ``model`` on random minibatches of ``demonstrations`` for ``steps`` AdamW steps.

    ``lr_schedule`` is a ``transformers.get_scheduler`` name over ``steps`` (no warm-up): "linear" (the default,
    as in TRL's SFT) decays to 0, so the policy settles on the demonstrations' average behaviour instead of the
    last minibatch's; "constant" keeps ``lr``.

    ``callback(step, loss)`` runs after each step; returning True stops early (e.g. once an eval of the policy
    reaches a target). Returns the loss of each step.
    """
    if not demonstrations:
        raise ValueError("warm_start: expected demonstrations, got none")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    scheduler = get_scheduler(lr_schedule, optimizer, num_warmup_steps=0, num_training_steps=steps)
    model.train()
    losses = []
    for step in range(1, steps + 1):
        picks = torch.randint(len(demonstrations), (batch_size,), generator=generator).tolist()
        loss = sft_loss(model, [demonstrations[i] for i in picks], pad_token_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if callback is not None and callback(step, losses[-1]):
            break
    return losses
