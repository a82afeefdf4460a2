"""One GSPO training run, from a flat config: the loop the env recipes (``recipes/gspo_math.py``,
``gspo_code.py``, ``gspo_codeforces.py``, ``gspo_search.py``) call, so that each recipe is its settings and one
call.

The loop, per step: every rank plays its own prompts (``prompts_per_step`` x ``group_size`` episodes, disjoint
seeds per rank and step, the same after a resume), the learner takes one GSPO step on them
(:class:`agentgspo.learning.learner.GSPOLearner`: the paper's clip band, ``minibatches`` optimizer steps), the sampler
gets the new weights, one line goes to ``DIR/metrics.jsonl`` (every ``trajectories_every`` steps the episodes go to
``DIR/trajectories/``; a recipe's :meth:`TrainConfig.eval_hook` evaluates). Checkpoints every ``checkpoint_every``
steps and on SIGINT/SIGTERM (then exit 130/143 with the command that resumes); a folder holding a run with other
settings is refused, a finished one reports its summary. At the end ``DIR/final/`` holds the policy
(``save_pretrained``, its tokenizer and ``agentgspo.json``) and ``DIR/summary.json`` the reward per step.

Settings come from the recipe's dataclass defaults, then ``--smoke`` (a CPU size on the tiny policy), then
``--config FILE.yaml``, then command-line flags (one ``--flag`` per field): :func:`run_recipe`.

Sharding: ``sharding="fsdp2"`` shards the policy with FSDP2 (:func:`agentgspo.learning.sharding.shard_policy`; also
what an ``accelerate launch --config_file recipes/accelerate/fsdp2_*.yaml`` run does) with fp32 master weights and bf16
compute under ``mixed_precision="bf16"``; the ``hf`` sampler is then an unsharded copy that gets the gathered full
weights after each step (:func:`agentgspo.learning.sharding.full_state_dict`).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import sys
import time
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgspo.policy.factory import BACKENDS

TRAIN_SEED_BASE = 1_000_000  # training prompts: env seeds from here (evaluations use small seeds)
DEMO_SEED_BASE = 9_000_000  # warm-start demonstrations
SUMMARY = "summary.json"
HISTORY_MODES = ("as_sampled", "split_turns")
SHARDINGS = ("none", "fsdp2")


def setting(default: Any, help: str) -> Any:  # noqa: A002 -- argparse's name
    """A config field with its help text (shown by ``--help`` and in the recipe's docs)."""
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: json.loads(json.dumps(default)), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class TrainConfig:
    """Every setting of a GSPO run (saved to DIR/config.json; a rerun must match it to resume)."""

    out: str = setting("runs/gspo", "run folder: config, metrics, checkpoints and the trained policy go here")
    seed: int = setting(0, "seed of the data order, sampling and (for 'tiny') the model init")
    # Policy.
    policy: str = setting("Qwen/Qwen3-30B-A3B", "the paper's MoE by default: a hub id resolved offline from the "
                                                "local Hugging Face cache (HF_HOME), a save_pretrained folder, or "
                                                "'tiny' (the embedded tiny MoE)")
    dtype: str = setting("float32", "parameter dtype when loading: float32 keeps fp32 master weights and AdamW "
                                    "state (compute in bf16 with --mixed-precision bf16)")
    mixed_precision: str = setting("no", "'no' or 'bf16': compute dtype of the forward/backward (fp32 master "
                                         "weights either way); an accelerate config's mixed_precision also applies")
    attn_implementation: str = setting("", "transformers attention implementation: eager, sdpa, "
                                           "flash_attention_2, ... (empty: the model's default)")
    device: str = setting("auto", "'auto' (the device accelerate gives this process) or 'cpu'")
    sharding: str = setting("none", "'none' (one copy per process; DDP across processes) or 'fsdp2' (parameters, "
                                    "gradients and optimizer state sharded over the processes)")
    activation_checkpointing: bool = setting(True, "recompute each decoder layer in the backward (less memory, "
                                                   "about one more forward; long episodes need it at 30B)")
    backend: str = setting("vllm", "who samples: 'vllm' (a vLLM engine in this process), 'server' (--server-url) "
                                   "or 'hf' (transformers in this process; small models); each gets the weights "
                                   "after a step")
    server_url: str = setting("", "comma-separated base URLs of `agentgspo serve-policy` servers (--backend "
                                  "server); they read the weights from DIR/sampler-RANK/ (a shared file system)")
    # Env and episodes.
    env_id: str = setting("agentgspo/Calculator-v0", "registered env id")
    env_kwargs: dict = setting({}, "keyword arguments of the env (a JSON object on the command line)")
    max_turns: int = setting(6, "assistant turns per episode (0: the env's registered budget)")
    max_new_tokens: int = setting(4096, "ids per assistant turn; Qwen3 thinks before it answers (0: the env's "
                                        "registered budget)")
    max_context: int = setting(16384, "ids per episode (0: the env's registered budget)")
    env_call_timeout_s: float = setting(300.0, "seconds one env call (reset, step) may take; past it the call is "
                                               "hung, the machine's fault: stop reason env_timeout, not trained "
                                               "(0: no limit)")
    env_budget_s: float = setting(1800.0, "seconds of env calls per episode (time waiting for the sampler not "
                                          "counted); past it the episode is truncated as env_budget and trained, "
                                          "keeping the reward earned (0: no budget)")
    sampler_timeout_s: float = setting(600.0, "seconds one sampler call may take; past it the episode ends as "
                                              "sampler_error, not trained (0: no limit)")
    history: str = setting("as_sampled", "'as_sampled': one sample per episode, each turn conditioned on the "
                                         "sequence as sampled; 'split_turns': each assistant turn its own sample, "
                                         "in the context the chat template renders at that turn (templates that "
                                         "drop earlier <think> blocks, e.g. Qwen3)")
    # GSPO (arXiv 2507.18071).
    steps: int = setting(200, "GSPO steps (rollout batch + update)")
    prompts_per_step: int = setting(16, "prompts per step, per process")
    group_size: int = setting(8, "samples per prompt: the group GSPO's advantages compare (Eq. 6)")
    lr: float = setting(1e-6, "AdamW learning rate")
    warmup_steps: int = setting(4, "optimizer steps of linear LR warm-up")
    minibatches: int = setting(4, "optimizer steps per rollout batch (paper §5.1)")
    micro_batch_tokens: int = setting(8192, "padded tokens per forward (gradients accumulate over micro-batches)")
    eps_low: float | None = setting(None, "lower clip range of the ratio (empty: the objective's, paper §5.1: "
                                          "3e-4 for gspo and gspo_token, 0.2 for grpo); config.json records the "
                                          "value used")
    eps_high: float | None = setting(None, "upper clip range of the ratio (empty: the objective's, paper §5.1: "
                                           "4e-4 for gspo and gspo_token, 0.27 for grpo)")
    logp_old: str = setting("recompute", "'recompute' (score the batch before updating) or 'sampler' (the "
                                         "sampler's log-probs, paper §5.4)")
    temperature: float = setting(1.0, "sampling temperature (the learner scores softmax(logits / T))")
    top_p: float = setting(1.0, "nucleus sampling (1: off); with --logp-old sampler only backends whose log-probs "
                                "are the full distribution's (hf) allow < 1")
    top_k: int = setting(0, "sample among the k most likely ids (0: off); as --top-p for --logp-old sampler")
    objective: str = setting("gspo", "'gspo' (sequence ratio, the paper), 'gspo_token' (Eq. 13-14) or 'grpo' (the "
                                     "token-ratio baseline, with its own clip band 0.2 / 0.27)")
    unit: str = setting("trajectory", "what one GSPO ratio covers: 'trajectory' (every assistant token, tool "
                                      "outputs masked) or 'turn' (each assistant turn its own ratio and clip)")
    credit: str = setting("trajectory", "'trajectory' (one advantage per episode) or 'turn' (per-turn "
                                        "return-to-go advantages from each step's reward; gspo_token, grpo or "
                                        "--unit turn)")
    turn_baseline: str = setting("episode", "--credit turn: 'episode' (each turn's return-to-go against the group's "
                                            "mean episode return: equals Eq. 6 when only the end is rewarded) or "
                                            "'turn' (against the group's returns-to-go at the same turn)")
    split_turns_weight: str = setting("episode", "--history split_turns: 'episode' (each episode weighs 1/N, its K "
                                                 "turn samples 1/K each: the paper's per-trajectory mean) or 'turn' "
                                                 "(each turn sample weighs 1/N: long episodes weigh more)")
    routing_replay: str = setting("off", "MoE: 'off', 'rollout' (replay the sampler's expert choices, R3; --backend "
                                         "hf) or 'old_policy' (replay the logp_old recompute's, the paper's Routing "
                                         "Replay)")
    router_aux_loss_coef: float = setting(-1.0, "MoE router load-balancing loss weight (-1: the model config's "
                                                "value; 0: off)")
    max_grad_norm: float = setting(1.0, "gradient clipping norm")
    # Optional supervised warm start on the env's demonstrator (oracle, and `wrong` in a share of the episodes).
    warm_demos: int = setting(0, "demonstration episodes for a warm start (0: none; a real checkpoint needs none)")
    warm_wrong_frac: float = setting(0.5, "share of the demonstrations played by the env's `wrong` policy")
    warm_steps: int = setting(0, "warm-start AdamW steps")
    warm_batch: int = setting(32, "demonstrations per warm-start step")
    warm_lr: float = setting(3e-3, "warm-start learning rate (linearly decayed to 0)")
    checkpoint_every: int = setting(10, "GSPO steps between checkpoints (an interruption saves one too)")
    trajectories_every: int = setting(10, "GSPO steps between saving the step's episodes (ids, masks, log-probs, "
                                          "messages) to DIR/trajectories/step_N_rankR.jsonl, for `agentgspo view "
                                          "FILE --tokenizer DIR/final` (0: never)")

    def __post_init__(self) -> None:
        choices = {"history": HISTORY_MODES, "sharding": SHARDINGS, "mixed_precision": ("no", "bf16"),
                   "backend": tuple(BACKENDS), "logp_old": ("recompute", "sampler")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}: expected one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        for name in ("steps", "prompts_per_step", "group_size", "minibatches", "micro_batch_tokens",
                     "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")
        if self.trajectories_every < 0:
            raise ValueError(f"trajectories_every: expected >= 0, got {self.trajectories_every}")
        if not isinstance(self.env_kwargs, dict):
            raise ValueError(f"env_kwargs: expected a JSON object, got {self.env_kwargs!r}")
        from agentgspo.policy.factory import run_options

        run_options(self.backend, seed=self.seed, server_urls=self.server_urls())  # each backend checks its needs
        if self.routing_replay == "rollout" and self.backend != "hf":
            raise ValueError("routing_replay 'rollout' needs the sampler's expert choices: --backend hf records them "
                             "(vLLM's routed-expert output needs its V2 runner with Triton, not wired here); or use "
                             "--routing-replay old_policy")
        for name in ("env_call_timeout_s", "env_budget_s", "sampler_timeout_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: expected >= 0 seconds (0: no limit), got {getattr(self, name)}")
        if self.turn_baseline not in ("episode", "turn") or self.split_turns_weight not in ("episode", "turn"):
            raise ValueError(f"turn_baseline and split_turns_weight: expected 'episode' or 'turn', got "
                             f"{self.turn_baseline!r} and {self.split_turns_weight!r}")
        # The clip band the run uses: the objective's (paper §5.1) unless given, written so config.json records it.
        from agentgspo.learning.learner import DEFAULT_EPS

        if self.objective not in DEFAULT_EPS:
            raise ValueError(f"objective: expected one of {', '.join(DEFAULT_EPS)}, got {self.objective!r}")
        low, high = DEFAULT_EPS[self.objective]
        self.eps_low = low if self.eps_low is None else float(self.eps_low)
        self.eps_high = high if self.eps_high is None else float(self.eps_high)
        if self.warm_demos and not self.warm_steps:
            raise ValueError("warm_demos without warm_steps: set --warm-steps too (or --warm-demos 0)")

    def server_urls(self) -> list[str]:
        """``server_url`` as a list."""
        return [url for url in self.server_url.split(",") if url]

    def train_env_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of the env the policy trains on: ``env_kwargs`` (a recipe with a held-out set
        adds what leaves it out)."""
        return self.env_kwargs

    def eval_hook(self, out: Path, rollout: Any) -> Any | None:
        """What evaluates the policy during training (called after each step with the step, the sampler and the
        renderer; returns metrics to log or ``None``), writing under ``out``; ``rollout`` holds the episode
        limits. ``None``: no evaluation (recipes with a held-out set override this, e.g.
        recipes/gspo_codeforces.py)."""
        return None


# The CPU size of every recipe's --smoke: the tiny policy, two steps of two prompts x two samples.
SMOKE: dict[str, Any] = dict(policy="tiny", backend="hf", device="cpu", activation_checkpointing=False, max_turns=2,
                             max_new_tokens=32, max_context=1024, steps=2, prompts_per_step=2, group_size=2, lr=1e-4,
                             checkpoint_every=1, trajectories_every=1)

# Settings that do not change what the run computes: a rerun may change them and still resume.
RESUMABLE_WITH_OTHER = ("out", "checkpoint_every", "trajectories_every")


def flag(name: str) -> str:
    """The command-line flag of config field ``name``."""
    return "--" + name.replace("_", "-")


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false", "1", "0", "yes", "no"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return lowered in ("true", "1", "yes")


def _json_parser(kind: type, name: str) -> Any:
    """An argparse type reading a JSON value of ``kind`` (``name`` for the error)."""
    def parse(text: str) -> Any:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"expected a JSON {name}, got {text!r} ({exc})") from None
        if not isinstance(value, kind):
            raise argparse.ArgumentTypeError(f"expected a JSON {name}, got {text!r}")
        return value

    return parse


def optional_inner(kind: Any) -> Any:
    """``X`` for a field typed ``X | None``, else ``None``."""
    args = typing.get_args(kind)
    if len(args) == 2 and type(None) in args:
        return next(arg for arg in args if arg is not type(None))
    return None


def _parser_type(kind: Any) -> Any:
    inner = optional_inner(kind)
    if inner is not None:  # `X | None`: an empty value (or none/null) is None
        parse_inner = _parser_type(inner)

        def parse_optional(text: str) -> Any:
            return None if text.strip().lower() in ("", "none", "null") else parse_inner(text)

        parse_optional.__name__ = getattr(parse_inner, "__name__", "value")
        return parse_optional
    return {bool: _parse_bool, dict: _json_parser(dict, "object"),
            list: _json_parser(list, "list (e.g. '[\"a\", \"b\"]')")}.get(kind, kind)


def recipe_parser(config_class: type, description: str) -> argparse.ArgumentParser:
    """``--smoke``, ``--config FILE.yaml`` and one ``--flag`` per field of ``config_class`` (defaults in help)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--smoke", action="store_true",
                        help="a CPU size on the tiny policy that runs in a minute (the test suite runs it)")
    parser.add_argument("--config", metavar="FILE.yaml", help="settings from a YAML mapping of field names; "
                                                              "command-line flags override them")
    kinds = typing.get_type_hints(config_class)
    for spec in dataclasses.fields(config_class):
        default = spec.default_factory() if spec.default is dataclasses.MISSING else spec.default
        shown = json.dumps(default) if isinstance(default, (dict, list)) else default
        parser.add_argument(flag(spec.name), dest=spec.name, type=_parser_type(kinds[spec.name]),
                            default=argparse.SUPPRESS, help=f"{spec.metadata['help']} (default: {shown})")
    return parser


def load_config(config_class: type, argv: list[str] | None = None, *, smoke: dict[str, Any] | None = None,
                description: str = "") -> Any:
    """The run's settings: ``config_class``'s defaults, then ``smoke`` (with ``--smoke``), then the YAML file of
    ``--config``, then the flags given. Unknown YAML keys are refused naming the closest field."""
    args = vars(recipe_parser(config_class, description).parse_args(argv))
    values: dict[str, Any] = {}
    if args.pop("smoke"):
        values.update(smoke or {})
    config_file = args.pop("config", None)
    if config_file:
        values.update(_read_yaml(config_file, config_class))
    values.update(args)
    return config_class(**values)


def _read_yaml(path: str, config_class: type) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--config {path}: cannot read it as YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}: expected a mapping of setting names to values, got {type(data).__name__}")
    names = [spec.name for spec in dataclasses.fields(config_class)]
    for key in data:
        if key.replace("-", "_") not in names:
            close = difflib.get_close_matches(key.replace("-", "_"), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"--config {path}: unknown setting {key!r}{hint}")
    kinds = typing.get_type_hints(config_class)
    values = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        kind = kinds[name]
        if optional_inner(kind) is not None:
            if value is None:
                values[name] = None
                continue
            kind = optional_inner(kind)
        if kind is float and isinstance(value, (int, str)) and not isinstance(value, bool):
            try:  # YAML 1.1 reads 1e-6 (no dot) as a string
                value = float(value)
            except ValueError:
                raise ValueError(f"--config {path}: {key}: expected a number, got {value!r}") from None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"--config {path}: {key}: expected {kind.__name__}, got {value!r}")
        values[name] = value
    return values


def run_recipe(config_class: type, argv: list[str] | None = None, *, smoke: dict[str, Any], command: str,
               description: str = "") -> int:
    """A recipe's command line: parse (see :func:`load_config`), :func:`train`, exit status (0 done, 130/143
    interrupted after a checkpoint, 2 for bad input) with one line, not a traceback, for bad input."""
    from agentgspo.training.run_folder import RunInterrupted

    try:
        config = load_config(config_class, argv, smoke=smoke, description=description)
        train(config, command=command)
    except RunInterrupted as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_status
    except (ValueError, LookupError, FileNotFoundError) as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def resume_command(config: Any, command: str) -> str:
    """The command that continues this run: the settings that differ from the recipe's defaults."""
    import shlex

    defaults = type(config)()
    parts = [flag("out"), config.out]
    for spec in dataclasses.fields(config):
        value = getattr(config, spec.name)
        if spec.name != "out" and value != getattr(defaults, spec.name):
            parts += [flag(spec.name), value if isinstance(value, str) else json.dumps(value)]
    return " ".join([command, *map(shlex.quote, parts)])


def episode_limits(config: Any) -> dict[str, int]:
    """``max_turns``, ``max_new_tokens``, ``max_context``: the config's, else the env's registered budget, else the
    library defaults."""
    from agentgspo.policy.policy_settings import LIMIT_DEFAULTS
    from agentgspo.environments.registry import env_budget

    budget = env_budget(config.env_id)
    return {name: getattr(config, name) or (getattr(budget, name) if budget else LIMIT_DEFAULTS[name])
            for name in ("max_turns", "max_new_tokens", "max_context")}


def train(config: Any, *, command: str = "python -m agentgspo.training.train") -> dict[str, Any]:
    """Run GSPO as ``config`` says (see the module docstring); returns the summary written to DIR/summary.json."""
    import agentgspo  # noqa: F401 -- registers the env ids
    from accelerate import Accelerator

    from agentgspo.policy.loading import resolve_checkpoint
    from agentgspo.environments.registry import check_env_kwargs, make
    from agentgspo.training.run_folder import StopSignals, check_run_folder

    started = time.perf_counter()
    out = Path(config.out)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    hparams = {"recipe": type(config).__name__, "world_size": world, **dataclasses.asdict(config)}
    check_run_folder(out, hparams, command=command, ignore=RESUMABLE_WITH_OTHER,
                     flag_of={spec.name: flag(spec.name) for spec in dataclasses.fields(config)})
    if (out / SUMMARY).exists():
        summary = json.loads((out / SUMMARY).read_text())
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"{out} holds a finished run ({summary['steps']} steps): nothing to do; pass another --out to "
                  "train again")
        return summary
    resolve_checkpoint(config.policy)  # not a model, or a hub id not cached: an error now, before any work
    check_env_kwargs(config.env_id, config.train_env_kwargs())
    make(config.env_id, **config.train_env_kwargs()).close()  # an unknown id or keyword: an error now
    accelerator = Accelerator(cpu=config.device == "cpu")
    if accelerator.num_processes != world:
        raise ValueError(f"WORLD_SIZE says {world} processes but accelerate started {accelerator.num_processes}; "
                         "launch with `accelerate launch` (or torchrun), which sets both")
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(hparams, indent=2, default=str))
    with StopSignals(announce=accelerator.is_main_process) as signals:
        return _train(config, accelerator, out, hparams, signals, started, command)


def _train(config: Any, accelerator: Any, out: Path, hparams: dict, signals: Any, started: float,
           command: str) -> dict[str, Any]:
    import gymnasium as gym
    import torch
    from accelerate.utils import set_seed
    from transformers import get_scheduler

    from agentgspo.training.checkpoint import latest_checkpoint, load_checkpoint, read_run_state, save_checkpoint
    from agentgspo.learning.learner import GSPOLearner, LearnerConfig
    from agentgspo.training.metrics import MetricsLogger, read_metrics, rollout_metrics_over_ranks
    from agentgspo.policy.base import SamplingParams
    from agentgspo.policy.hf import HFPolicy
    from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize
    from agentgspo.training.run_folder import RunInterrupted
    from agentgspo.rollouts.trajectory import write_jsonl

    set_seed(config.seed)
    rank, world = accelerator.process_index, accelerator.num_processes
    limits = episode_limits(config)

    def make_env() -> gym.Env:
        return gym.make(config.env_id, disable_env_checker=True, **config.train_env_kwargs())

    def interrupted(where: str, checkpoint: Path) -> RunInterrupted:
        return RunInterrupted(signals.signum, f"{signals.name} during {where}: saved {checkpoint}. Resume with: "
                                              f"{resume_command(config, command)}")

    record = getattr(config, "routing_replay", "off") == "rollout"  # the sampler records its expert choices (R3)
    policy = HFPolicy.from_pretrained(config.policy, dtype=config.dtype, device=str(accelerator.device),
                                      attn_implementation=config.attn_implementation or None, seed=config.seed,
                                      record_routing=record)
    renderer, model = policy.renderer, policy.model
    resume_from = latest_checkpoint(out)
    run_state = read_run_state(resume_from) if resume_from is not None else {"phase": "warm_start", "step": 0}
    if config.warm_steps:
        _warm_start(config, accelerator, out, model, renderer, make_env, resume_from, run_state, signals,
                    interrupted)

    def make_optimizer(parameters: Any) -> torch.optim.Optimizer:
        return torch.optim.AdamW(parameters, lr=config.lr, weight_decay=0.0)

    if config.sharding == "fsdp2" or getattr(accelerator, "is_fsdp2", False):
        from agentgspo.learning.sharding import shard_policy

        model, optimizer = shard_policy(accelerator, model, make_optimizer, mixed_precision=config.mixed_precision,
                                        max_grad_norm=config.max_grad_norm)
        scheduler = get_scheduler("constant_with_warmup", optimizer, num_warmup_steps=config.warmup_steps)
        accelerator.register_for_checkpointing(scheduler)
        # The sampler: an unsharded copy that gets the gathered full weights after each step.
        policy = HFPolicy.from_pretrained(config.policy, dtype=config.dtype, device=str(accelerator.device),
                                          attn_implementation=config.attn_implementation or None, seed=config.seed,
                                          record_routing=record)
    else:
        if config.mixed_precision != "no" and accelerator.mixed_precision == "no":
            raise ValueError("--mixed-precision bf16 without FSDP2: launch with `accelerate launch "
                             "--mixed_precision bf16` (or --sharding fsdp2)")
        optimizer = make_optimizer(model.parameters())
        scheduler = get_scheduler("constant_with_warmup", optimizer, num_warmup_steps=config.warmup_steps)
        model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
        policy.model = accelerator.unwrap_model(model)
    learner = GSPOLearner(model, optimizer, accelerator, pad_token_id=renderer.tokenizer.pad_token_id,
                          scheduler=scheduler, seed=config.seed + rank, config=LearnerConfig(
                              objective=config.objective, unit=config.unit, credit=config.credit,
                              routing_replay=config.routing_replay,
                              router_aux_loss_coef=None if config.router_aux_loss_coef < 0 else
                              config.router_aux_loss_coef, eps_low=config.eps_low, eps_high=config.eps_high,
                              minibatches=config.minibatches, micro_batch_tokens=config.micro_batch_tokens,
                              logp_old=config.logp_old, temperature=config.temperature,
                              max_grad_norm=config.max_grad_norm, turn_baseline=config.turn_baseline,
                              split_turns_weight=config.split_turns_weight,
                              activation_checkpointing=config.activation_checkpointing))
    accelerator.register_for_checkpointing(learner)
    start_step = 0
    if run_state["phase"] == "gspo":
        start_step = load_checkpoint(accelerator, resume_from)["step"]
        accelerator.print(f"resumed from {resume_from} at step {start_step}")

    sampler_folder = out / f"sampler-{rank}"
    sampler = _sampler(config, policy, sampler_folder)
    _refresh_sampler(accelerator, sampler, model, policy, sampler_folder)
    rollout = RolloutConfig(group_size=config.group_size, max_turns=limits["max_turns"],
                            max_context=limits["max_context"], history=config.history,
                            env_call_timeout_s=config.env_call_timeout_s or None,
                            env_budget_s=config.env_budget_s or None,
                            sampler_timeout_s=config.sampler_timeout_s or None,
                            sampling=SamplingParams(temperature=config.temperature, top_p=config.top_p,
                                                    top_k=config.top_k, max_new_tokens=limits["max_new_tokens"]))
    runner = RolloutRunner(make_env, sampler, renderer, rollout, env_id=config.env_id)
    evaluation = config.eval_hook(out / "eval", rollout) if accelerator.is_main_process else None
    logger = MetricsLogger(out, hparams, resume_step=start_step, enabled=accelerator.is_main_process)
    for step in range(start_step, config.steps):
        first = TRAIN_SEED_BASE + (step * world + rank) * config.prompts_per_step
        rollout_started = time.perf_counter()
        model.eval()
        trajectories = runner.run_sync(range(first, first + config.prompts_per_step),
                                       sampling_seed=config.seed * 1_000_003 + step)
        model.train()
        rollout_seconds = time.perf_counter() - rollout_started
        if config.trajectories_every and (step + 1) % config.trajectories_every == 0:
            (out / "trajectories").mkdir(parents=True, exist_ok=True)
            write_jsonl(trajectories, out / "trajectories" / f"step_{step + 1:06d}_rank{rank}.jsonl")
        stats = learner.step(trajectories)
        _refresh_sampler(accelerator, sampler, model, policy, sampler_folder)
        # Rank 0 evaluates the updated weights; the other ranks go on and wait for it at the next step's update.
        evaluated = evaluation(step + 1, sampler, renderer) if evaluation is not None else None
        batch = summarize(trajectories)
        shared = rollout_metrics_over_ranks(accelerator, batch)  # over the episodes trained on, all ranks
        logger.log(step + 1, {**shared, **stats,
                              "rollout_seconds": rollout_seconds, "tokens_mean": batch["tokens_mean"],
                              "samples": len(trajectories), "stop_reasons": batch["stop_reasons"],
                              "elapsed_s": time.perf_counter() - started, **(evaluated or {})})
        shown = "".join(f" {name} {value:.3f}" for name, value in (evaluated or {}).items())
        accelerator.print(f"step {step + 1}/{config.steps}: reward {shared['reward_mean']:.3f} success "
                          f"{shared['success']:.3f} excluded {shared['excluded_frac']:.2f} "
                          f"loss {stats.get('loss', 0.0):.4f} ({rollout_seconds:.1f} s rollout){shown}", flush=True)
        saved = None
        if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps:
            saved = save_checkpoint(accelerator, out, step + 1, {})
        if step + 1 < config.steps and _stop_requested(accelerator, signals):
            logger.close()
            raise interrupted(f"GSPO (step {step + 1})", saved or save_checkpoint(accelerator, out, step + 1, {}))
    if sampler is not policy and hasattr(sampler, "close"):
        sampler.close()
    logger.close()
    summary = {"steps": config.steps, "seconds": time.perf_counter() - started,
               "reward_mean": [row["reward_mean"] for row in read_metrics(out / "metrics.jsonl")]
               if accelerator.is_main_process else []}
    _save_final(config, accelerator, model, renderer, out / "final", limits)
    if accelerator.is_main_process:
        (out / SUMMARY).write_text(json.dumps(summary))
        print(f"done: {config.steps} steps; reward per step {[round(r, 3) for r in summary['reward_mean']]}; "
              f"outputs in {out}/ (final/, metrics.jsonl, trajectories/, checkpoints/, tensorboard/)", flush=True)
    # A barrier first: a rank that destroys the process group while its last send of a collective (a gloo send
    # completes locally) is still unread aborts ('terminate called without an active exception').
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return summary


def _warm_start(config: Any, accelerator: Any, out: Path, model: Any, renderer: Any, make_env: Any,
                resume_from: Path | None, run_state: dict, signals: Any, interrupted: Any) -> None:
    """Imitate the env's (imperfect) demonstrator before GSPO, resumable; skipped once it has finished."""
    from agentgspo.training.checkpoint import load_warm_checkpoint, save_warm_checkpoint
    from agentgspo.training.sft import WarmStartProgress, play_demonstrations, warm_start

    if run_state["phase"] == "gspo":
        return  # GSPO's checkpoint holds the weights
    progress = WarmStartProgress()
    if resume_from is not None:
        trainer_state, _ = load_warm_checkpoint(resume_from, model)
        progress.load_state_dict(trainer_state)
        if progress.step >= config.warm_steps:
            return
    demos = play_demonstrations(make_env, renderer, range(DEMO_SEED_BASE, DEMO_SEED_BASE + config.warm_demos),
                                wrong_frac=config.warm_wrong_frac, seed=config.seed, env_id=config.env_id)

    def after_step(step: int, loss: float) -> bool:
        if step % 50 == 0:
            accelerator.print(f"warm start step {step}/{config.warm_steps}: loss {loss:.3f}", flush=True)
        if step == config.warm_steps:
            save_warm_checkpoint(accelerator, out, step, model, progress.state_dict(), {})
        elif _stop_requested(accelerator, signals):
            raise interrupted(f"the warm start (step {step})",
                              save_warm_checkpoint(accelerator, out, step, model, progress.state_dict(), {}))
        return False

    warm_start(model, demos, pad_token_id=renderer.tokenizer.pad_token_id, steps=config.warm_steps,
               batch_size=config.warm_batch, lr=config.warm_lr, seed=config.seed, callback=after_step,
               progress=progress)


def _sampler(config: Any, policy: Any, folder: Path) -> Any:
    """The backend ``--backend`` names: the HF policy itself (it samples with the learner's module), or another
    backend loaded from ``folder`` (the weights and tokenizer written there)."""
    from agentgspo.policy.factory import backend_class, make_backend, run_options
    from agentgspo.policy.weight_sync import save_weights

    if isinstance(policy, backend_class(config.backend)):
        return policy
    save_weights(policy.model, folder)
    policy.renderer.tokenizer.save_pretrained(folder)
    return make_backend(str(folder), config.backend,
                        **run_options(config.backend, seed=config.seed, server_urls=config.server_urls()))


def _refresh_sampler(accelerator: Any, sampler: Any, model: Any, policy: Any, folder: Path) -> None:
    """Give the sampler the learner's current weights (gathered from the shards under FSDP2)."""
    from agentgspo.policy.weight_sync import sync_weights
    from agentgspo.learning.sharding import full_state_dict, is_sharded, load_sampler_weights

    if is_sharded(model):
        load_sampler_weights(policy.model, full_state_dict(accelerator, model))  # a collective: every rank
        model = policy.model  # the unsharded copy: the sampler itself (hf), or what vLLM / the servers reload
    sync_weights(sampler, model, folder)


def _stop_requested(accelerator: Any, signals: Any) -> bool:
    """Whether any rank received a stop signal (every rank must stop at the same step)."""
    import torch

    flag_tensor = torch.tensor([0.0 if signals.signum is None else 1.0], device=accelerator.device)
    return bool(accelerator.reduce(flag_tensor, reduction="sum").item() > 0)


def _save_final(config: Any, accelerator: Any, model: Any, renderer: Any, folder: Path,
                limits: dict[str, int]) -> None:
    """The trained policy as a ``save_pretrained`` folder (full weights) with its tokenizer and settings."""
    from agentgspo.policy.policy_settings import PolicySettings, write_policy_settings
    from agentgspo.policy.quiet import no_transformers_progress_bars
    from agentgspo.learning.sharding import full_state_dict

    state = full_state_dict(accelerator, model, all_ranks=False)  # a collective under FSDP2 / DeepSpeed
    if not accelerator.is_main_process:
        return
    base = accelerator.unwrap_model(model)
    # One copy of tied tensors (lm_head tied to the embedding): named_parameters lists each tensor once.
    stored = {name for name, _ in base.named_parameters()} | {name for name, _ in base.named_buffers()}
    state = {name: tensor for name, tensor in state.items() if name in stored}
    with no_transformers_progress_bars():
        base.save_pretrained(folder, state_dict=state)
        renderer.tokenizer.save_pretrained(folder)
    write_policy_settings(folder, PolicySettings(
        env_id=config.env_id, env_kwargs=config.env_kwargs,
        chat={"end_of_turn": renderer.tokenizer.convert_ids_to_tokens(renderer.end_of_turn_id)},
        temperature=config.temperature, top_p=config.top_p, top_k=config.top_k, **limits))
