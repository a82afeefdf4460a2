"""The tiny policy's CPU learner and synthetic trajectory batches, shared by the learner and decoupled-objective
tests (tests/learning/test_learner.py, tests/objective/test_decoupled.py)."""

from __future__ import annotations

import random

import torch
from accelerate import Accelerator

from agentgspo.core.trajectory import Trajectory
from agentgspo.learning.learner import GSPOLearner, LearnerConfig

# What an HF sampler at temperature 1 records (its log-probs are the full distribution's, as the learner's).
FULL_SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "logprobs": "full"}


def _trajectories(rewards, *, stop_reasons=None, group_size=4, seed=0):
    rng = random.Random(seed)
    out = []
    for i, reward in enumerate(rewards):
        t = Trajectory(group_id=i // group_size, sample_id=i % group_size, sampling=dict(FULL_SAMPLING))
        t.append_forced([rng.randrange(3, 100) for _ in range(10)])
        sampled = [rng.randrange(3, 100) for _ in range(rng.randrange(3, 12))]
        t.append_sampled(sampled, [-4.0] * len(sampled))
        t.reward = float(reward)
        if stop_reasons:
            t.stop_reason = stop_reasons[i]
        out.append(t)
    return out


def _learner(model, *, optimizer=None, **config):
    accelerator = Accelerator(cpu=True)
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    return GSPOLearner(model, optimizer, accelerator, pad_token_id=0, config=LearnerConfig(**config))
