"""What a run ends with, and the held-out evaluations it plays on the way: the final policy folder (full weights,
tokenizer, how to play it), the sampled and greedy evaluation on held-out tasks, and the report it prints.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgspo.core.sampling import SamplingParams
from agentgspo.core.trajectory import write_jsonl
from agentgspo.environments.held_out import final_eval_kwargs
from agentgspo.environments.registry import resolve
from agentgspo.learning.sharding import full_state_dict
from agentgspo.models.quiet import no_transformers_progress_bars
from agentgspo.policy.policy_settings import PolicySettings, write_policy_settings
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize
from agentgspo.training.config import TrainConfig, bare_env_id

__all__ = ["evaluate", "final_evaluation", "save_final", "report"]


def evaluate(
    policy: Any,
    config: TrainConfig,
    limits: dict[str, int],
    seeds: range,
    *,
    temperature: float,
    save_to: Path | None = None,
) -> dict[str, Any]:
    """Success of ``policy`` on ``seeds`` of the held-out env (a fresh runner, no training): the env of
    ``final_eval_env_kwargs``, by default the training env's held-out split (a procedural env: its own, the seeds
    being disjoint from training's), with the run's episode ``limits``. ``save_to``: the episodes are written there
    (JSONL; give it on one rank)."""
    kwargs, _ = final_eval_kwargs(config.env_id, config.env_kwargs, config.final_eval_env_kwargs)
    env_id, kwargs = resolve(bare_env_id(config.env_id), kwargs)
    rollout = RolloutConfig(
        group_size=1,
        max_turns=limits["max_turns"],
        max_context=limits["max_context"],
        env_call_timeout_s=config.env_call_timeout_s or None,  # the run's limits, as its training episodes
        env_budget_s=config.env_budget_s or None,
        sampler_timeout_s=config.sampler_timeout_s or None,
        sampling=SamplingParams(temperature=temperature, max_new_tokens=limits["max_new_tokens"]),
    )
    make_env = functools.partial(gym.make, env_id, disable_env_checker=True, **kwargs)
    episodes = RolloutRunner(make_env, policy, policy.renderer, rollout).run_sync(list(seeds), sampling_seed=12345)
    if save_to is not None:
        save_to.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(episodes, save_to)
    return summarize(episodes)


def final_evaluation(
    policy: Any, config: TrainConfig, limits: dict[str, int], seeds: range, folder: Path | None
) -> dict[str, Any]:
    """The final evaluation (``final_eval_episodes`` on ``seeds``): sampled (T = 1) and greedy success on held-out
    tasks, and what was evaluated; the episodes go to ``folder`` (``sampled.jsonl``, ``greedy.jsonl``; ``None``: not
    written, the other ranks)."""
    kwargs, held_out_by = final_eval_kwargs(config.env_id, config.env_kwargs, config.final_eval_env_kwargs)
    sampled, greedy = (
        evaluate(policy, config, limits, seeds, temperature=t, save_to=folder / f"{name}.jsonl" if folder else None)
        for name, t in (("sampled", 1.0), ("greedy", 0.0))
    )
    return {
        "sampled": sampled["success"],
        "greedy": greedy["success"],
        "episodes": len(seeds),
        # What was evaluated: the env's kwargs, its split ("test": held-out rows; None: all of that env's tasks),
        # what holds them out ("split", "seeds" disjoint from training's, or the "env_kwargs" given).
        "env_kwargs": kwargs,
        "split": kwargs.get("split"),
        "held_out_by": held_out_by,
        "seeds": [seeds.start, seeds.stop],
    }


def save_final(accelerator: Any, model: Any, renderer: Any, folder: Path, settings: PolicySettings) -> None:
    """The trained policy as a ``save_pretrained`` folder (full weights) with its tokenizer and ``settings`` (how to
    play it). A collective under FSDP2 / DeepSpeed: call it on every rank; the main process writes."""
    state = full_state_dict(accelerator, model, all_ranks=False)
    if not accelerator.is_main_process:
        return
    base = accelerator.unwrap_model(model)
    # One copy of tied tensors (lm_head tied to the embedding): named_parameters lists each tensor once.
    stored = {name for name, _ in base.named_parameters()} | {name for name, _ in base.named_buffers()}
    state = {name: tensor for name, tensor in state.items() if name in stored}
    with no_transformers_progress_bars():
        base.save_pretrained(folder, state_dict=state)
        renderer.tokenizer.save_pretrained(folder)
    write_policy_settings(folder, settings)


def report(out: Path, summary: dict[str, Any]) -> None:
    """The last lines: why it stopped, the numbers and where each output is."""
    print(f"stopped: {summary.get('stopped')}", flush=True)
    success, final_eval = summary.get("success") or [], summary.get("final_eval")
    first = f" (first GSPO step: {success[0]:.2f})" if success else ""
    if final_eval:
        what = {  # what held the evaluated tasks out (a summary written before splits says nothing)
            "split": f" (the env's held-out split {final_eval.get('split')!r})",
            "seeds": " (seeds disjoint from training's)",
            "env_kwargs": " (the env of --final-eval-env-kwargs)",
        }.get(final_eval.get("held_out_by"), "")
        print(
            f"final eval on {final_eval['episodes']} held-out prompts: sampled success {final_eval['sampled']:.2f}, "
            f"greedy {final_eval['greedy']:.2f}{first}; {summary['seconds']:.0f} s{what}"
        )
    else:
        print(f"reward per step {[round(r, 3) for r in summary.get('reward_mean', [])]}; {summary['seconds']:.0f} s")
    print(f"outputs in {out}/:")
    for name, what in (
        ("final/", "the trained policy (save_pretrained; agentgspo.json: the env and limits it was trained with)"),
        ("summary.json", "these numbers"),
        ("final_eval/", "the final evaluation's episodes, sampled.jsonl and greedy.jsonl (agentgspo view FILE)"),
        ("metrics.jsonl", "one line per GSPO step"),
        ("reward.png", "the training curves"),
        ("trajectories/", "the episodes of every --trajectories-every steps (agentgspo view FILE)"),
        ("tensorboard/", f"TensorBoard events: tensorboard --logdir {out / 'tensorboard'}"),
        ("checkpoints/", "the last checkpoints"),
        ("config.json", "the settings of this run"),
    ):
        print(f"  {name:<16} {what}")
    print(f"play it: agentgspo rollout --policy {out / 'final'} --out {out / 'rollout'}", flush=True)
