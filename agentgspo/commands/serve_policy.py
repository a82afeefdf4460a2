"""`agentgspo serve-policy`: serve a checkpoint with vLLM's own OpenAI-compatible server, set up for RL rollouts.

The process becomes ``python -m vllm.entrypoints.openai.api_server`` with the settings ``--backend server`` clients rely
on: the same log-prob meaning as the other backends (``--logprobs-mode processed_logprobs``), the weight-sync worker
extension (``agentgspo_reload_weights``, see agentgspo/policy/weight_sync.py) and the development endpoints it is called
through (``VLLM_SERVER_DEV_MODE=1``: ``/collective_rpc``, ``/reset_prefix_cache``, and vLLM's RL routes
``/pause?mode=keep`` and ``/resume`` that let a weight update land while turns are in flight, and
``/init_weight_transfer_engine`` ... ``/finish_weight_update`` that stream weights in), and the gloo weight-transfer
engine (``--weight-transfer-config '{"backend": "gloo"}'``, see agentgspo/policy/weight_transfer.py; ``--weight-transfer
folder`` leaves it out). Expose such a server only to your trainer and rollout workers: those endpoints are not
authenticated.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from agentgspo.cli import port_number
from agentgspo.policy.loading import resolve_checkpoint
from agentgspo.policy.vllm import (
    CHUNKED_PREFILL,
    LOGPROBS_MODE,
    WEIGHT_SYNC_EXTENSION,
    require_vllm,
    set_cpu_defaults,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `serve-policy`."""
    parser.add_argument("--policy", default="tiny", help="'tiny' (embedded tiny MoE) or a model folder")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=port_number, default=8000, help="port to listen on")
    parser.add_argument(
        "--dtype",
        default="float32",
        help="weights' dtype (float32 matches the learner's log-probs best; bfloat16 is faster)",
    )
    parser.add_argument("--max-num-seqs", type=int, default=256, help="most sequences decoded together")
    parser.add_argument("--seed", type=int, default=0, help="seed of requests that carry none")
    parser.add_argument(
        "--enforce-eager", action="store_true", help="skip graph compilation: faster start, slower generation"
    )
    parser.add_argument(
        "--weight-transfer",
        choices=("gloo", "folder"),
        default="gloo",
        help="how trainers update the weights: 'gloo' streams them in (vLLM's weight-transfer routes, this "
        "package's gloo engine); 'folder' only reloads folders the trainer writes",
    )
    parser.add_argument(
        "vllm_args",
        nargs=argparse.REMAINDER,
        help="after `--`: more arguments for vLLM's server, e.g. -- --max-model-len 2048",
    )


def server_command(
    policy: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    dtype: str = "float32",
    max_num_seqs: int = 256,
    seed: int = 0,
    enforce_eager: bool = False,
    weight_transfer: str = "gloo",
    extra: list[str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start vLLM's OpenAI server for ``policy`` (a folder or "tiny")."""
    require_vllm("serve-policy")
    path = resolve_checkpoint(policy)
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(path),
        "--served-model-name",
        "policy",
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        dtype,
        "--max-num-seqs",
        str(max_num_seqs),
        "--seed",
        str(seed),
        "--logprobs-mode",
        LOGPROBS_MODE,
        "--worker-extension-cls",
        WEIGHT_SYNC_EXTENSION,
        "--disable-uvicorn-access-log",
        "--enable-chunked-prefill" if CHUNKED_PREFILL else "--no-enable-chunked-prefill",
    ]
    if enforce_eager:
        command.append("--enforce-eager")
    if weight_transfer == "gloo":  # registered in the server's workers by this package's vLLM plugin
        command += ["--weight-transfer-config", json.dumps({"backend": "gloo"})]
    command += [a for a in (extra or []) if a != "--"]
    set_cpu_defaults()
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    return command, env


def run(args: argparse.Namespace) -> int:
    """Replace this process with vLLM's server (signals reach it directly); returns only on failure to start."""
    command, env = server_command(
        args.policy,
        host=args.host,
        port=args.port,
        dtype=args.dtype,
        max_num_seqs=args.max_num_seqs,
        seed=args.seed,
        enforce_eager=args.enforce_eager,
        weight_transfer=args.weight_transfer,
        extra=args.vllm_args,
    )
    print(f"serving {args.policy} at http://{args.host}:{args.port} (model name 'policy')", flush=True)
    os.execve(command[0], command, env)
    return 1  # not reached
