"""Supervised warm start: maximise the log-likelihood of the sampled (mask 1) tokens of demonstrations.

Used by the quickstart to imitate a demonstrator before GSPO. Loss = mean over masked tokens of -log p (a token
mean, the usual SFT convention; RL objectives live in :mod:`agentgspo.objective`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from transformers import get_scheduler

from agentgspo.objective.batching import collate, score
from agentgspo.core.chat import ChatRenderer
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner
from agentgspo.core.trajectory import Trajectory, read_jsonl, write_jsonl

__all__ = ["play_demonstrations", "cached_demonstrations", "sft_loss", "WarmStartProgress", "warm_start"]


def play_demonstrations(
    make_env: Callable[[], gym.Env],
    renderer: ChatRenderer,
    seeds: Iterable[int],
    *,
    wrong_frac: float = 0.0,
    seed: int = 0,
    env_id: str | None = None,
) -> list[Trajectory]:
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
            raise ValueError(
                f"play_demonstrations: env {env_id or type(env).__name__} defines no `{role}` policy; "
                f"give it one (a staticmethod from messages to the reply text) or set wrong_frac to "
                f"{0.0 if role == 'wrong' else 1.0}"
            )
        runner = RolloutRunner(
            make_env, ScriptedPolicy(policy, renderer), renderer, RolloutConfig(group_size=1), env_id=env_id
        )
        played.update(zip(mine, runner.run_sync(mine)))
    return [played[s] for s in seeds]


def cached_demonstrations(path: Path, play: Callable[[], list[Trajectory]], *, count: int, write: bool) -> list:
    """The ``count`` demonstrations kept at ``path`` (JSONL) when an interrupted run wrote them all (playing thousands
    of episodes again costs minutes), else ``play()``'s, written there whole or not at all when ``write`` (one rank:
    another rank, or a rerun, may read it)."""
    if path.exists():
        demos = read_jsonl(path)
        if len(demos) == count:
            return demos
    demos = play()
    if write:
        staging = path.with_name(f".{path.name}.tmp")
        write_jsonl(demos, staging)
        staging.rename(path)
    return demos


def sft_loss(model: Any, trajectories: Sequence[Trajectory], pad_token_id: int) -> torch.Tensor:
    """Mean negative log-likelihood of the mask-1 tokens of ``trajectories``."""
    batch = collate(trajectories, pad_token_id).to(next(model.parameters()).device)
    logprobs, _ = score(model, batch)  # [B, T]
    masked = torch.where(batch.loss_mask, logprobs, torch.zeros_like(logprobs))  # [B, T]
    return -masked.sum() / batch.loss_mask.sum().clamp(min=1)


class WarmStartProgress:
    """How far a warm start got, to save and resume it exactly: the last step done and the optimizer, LR schedule
    and data-order generator after it.

    Pass one to :func:`warm_start` (``progress=``): it is kept current as steps run (save ``state_dict()`` from the
    callback); one restored with ``load_state_dict`` makes ``warm_start`` continue after the saved step.
    """

    def __init__(self) -> None:
        self.step = 0
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: Any = None
        self.generator: torch.Generator | None = None
        self._restore: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        """The step and the optimizer, scheduler and generator states (a warm start must have begun)."""
        if self.optimizer is None:
            raise RuntimeError("WarmStartProgress.state_dict: no warm start has run with this progress yet")
        return {
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a saved state; the next :func:`warm_start` with this progress continues after its step."""
        self.step = int(state["step"])
        self._restore = state


def warm_start(
    model: Any,
    demonstrations: Sequence[Trajectory],
    *,
    pad_token_id: int,
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    lr_schedule: str = "linear",
    seed: int = 0,
    callback: Callable[[int, float], bool] | None = None,
    progress: WarmStartProgress | None = None,
) -> list[float]:
    """Train ``model`` on random minibatches of ``demonstrations`` for ``steps`` AdamW steps.

    ``lr_schedule`` is a ``transformers.get_scheduler`` name over ``steps`` (no warm-up): "linear" (the default,
    as in TRL's SFT) decays to 0, so the policy settles on the demonstrations' average behaviour instead of the
    last minibatch's; "constant" keeps ``lr``.

    ``callback(step, loss)`` runs after each step; returning True stops early (e.g. once an eval of the policy
    reaches a target). Returns the loss of each step run. ``progress`` (a :class:`WarmStartProgress`) makes the
    run resumable: restored from a checkpoint it continues after the saved step, with the model's weights restored
    by the caller, exactly as if never stopped.
    """
    if not demonstrations:
        raise ValueError("warm_start: expected demonstrations, got none")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    scheduler = get_scheduler(lr_schedule, optimizer, num_warmup_steps=0, num_training_steps=steps)
    first = 1
    if progress is not None:
        if progress._restore is not None:
            optimizer.load_state_dict(progress._restore["optimizer"])
            scheduler.load_state_dict(progress._restore["scheduler"])
            generator.set_state(progress._restore["generator"])
            first, progress._restore = progress.step + 1, None
        progress.optimizer, progress.scheduler, progress.generator = optimizer, scheduler, generator
    model.train()
    losses = []
    for step in range(first, steps + 1):
        picks = torch.randint(len(demonstrations), (batch_size,), generator=generator).tolist()
        loss = sft_loss(model, [demonstrations[i] for i in picks], pad_token_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if progress is not None:
            progress.step = step
        if callback is not None and callback(step, losses[-1]):
            break
    return losses
