"""Shared by the vLLM test modules: the warm-started tiny policy saved as a checkpoint, the learner's fp32
log-probs of sampled ids, a real GSPO step, and a real `agentgspo serve-policy` server process."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import torch

from agentgspo.objective.batching import collate, score
from agentgspo.core.sampling import SamplingParams

#: vLLM fp32 (its own kernels, KV cache, batch) vs the learner's fp32 forward: measured <= 1e-6 per token.
LOGPROB_ATOL = 1e-4
#: a GSPO step at lr 1e-2 moves log-probs by far more than this (measured: 0.1-1 nats).
MOVED = 1e-2
ENGINE_OPTIONS = dict(enforce_eager=True, max_num_seqs=64)  # eager: engine start ~20 s instead of ~50 s


def save_checkpoint(model, tokenizer, folder: Path) -> Path:
    """``model`` and ``tokenizer`` as a checkpoint folder vLLM can load."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def learner_logprobs(model, prompt: list[int], ids: list[int], temperature: float = 1.0) -> torch.Tensor:
    """log_softmax(logits / T) of ``ids`` after ``prompt``: the learner's fp32 scoring of one sampled turn."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float() / temperature  # [n, V]
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)  # [n]


def max_gap_to_learner(model, trajectories, pad_token_id: int) -> float:
    """Largest |sampler log-prob - learner log-prob| over every sampled token of ``trajectories``."""
    batch = collate(trajectories, pad_token_id)
    with torch.no_grad():
        logprobs, _ = score(model, batch, temperature=1.0)
    return float((logprobs - batch.sampler_logprobs).abs()[batch.loss_mask].max())


def gspo_step(model, trajectories, pad_token_id: int):
    """A copy of ``model`` after one real GSPO optimizer step on ``trajectories`` (rewards alternate 1, 0 within
    each group so every group has an advantage)."""
    from accelerate import Accelerator

    from agentgspo.learning.learner import GSPOLearner, LearnerConfig

    updated = copy.deepcopy(model).train()
    for trajectory in trajectories:
        trajectory.reward = float(trajectory.sample_id % 2)
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(updated.parameters(), lr=1e-2)
    prepared, optimizer = accelerator.prepare(updated, optimizer)
    metrics = GSPOLearner(
        prepared, optimizer, accelerator, pad_token_id=pad_token_id, config=LearnerConfig(minibatches=1)
    ).step(trajectories)
    assert metrics["optimizer_steps"] >= 1, metrics
    return accelerator.unwrap_model(prepared).eval()


def perturbed(model, scale: float = 0.01, seed: int = 0):
    """A copy of ``model`` with Gaussian noise of std ``scale`` added to every parameter: new weights in a fraction
    of a second (a GSPO step needs a rollout first), moving log-probs by far more than ``MOVED``."""
    updated = copy.deepcopy(model).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in updated.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype) * scale)
    return updated


def greedy(n: int = 16) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_new_tokens=n)


class PolicyServer:
    """A real `agentgspo serve-policy` process (vLLM's OpenAI server) on a free port of 127.0.0.1."""

    def __init__(self, checkpoint: Path, port: int, log: Path):
        from agentgspo.commands.serve_policy import server_command

        command, env = server_command(checkpoint, port=port, max_num_seqs=64, enforce_eager=True)
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.process = subprocess.Popen(
            command, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_ready(self, timeout_s: float = 900.0) -> None:
        """Return once ``/v1/models`` answers; fail with the log's tail if the server exits first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            try:
                self.process.wait(timeout=1.0)  # wakes early if the server dies
            except subprocess.TimeoutExpired:
                pass
        raise TimeoutError(f"server not ready in {timeout_s} s:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the server and its engine processes; returns once the server process is reaped."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL whatever is left of its process group."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
