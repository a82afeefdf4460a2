"""What a ``--policy`` may name, where its checkpoint comes from and how it is loaded: one place for every backend.

A ``--policy`` value (and a recipe's ``policy`` setting) names one of:

- ``tiny``: the embedded tiny MoE (built locally on first use);
- a local folder written by ``save_pretrained`` (weights, ``config.json``, the tokenizer files);
- a Hugging Face hub id such as ``Qwen/Qwen3-30B-A3B``, resolved **offline** from the local cache
  (``huggingface_hub``'s cache: ``$HF_HUB_CACHE``, by default ``$HF_HOME/hub``). Nothing is downloaded here: a
  model that is not cached gets an error naming ``huggingface-cli download ID`` and the cache searched.

:func:`resolve_checkpoint` turns the name into a folder; :func:`load_tokenizer` and :func:`load_model` load it with
the settings a user picks (dtype, device, attention implementation). ``HFPolicy.from_pretrained`` and the vLLM
backends call these, so a name means the same checkpoint everywhere.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import torch

from agentgspo.models.moe import register as register_experts_implementation
from agentgspo.models.quiet import no_transformers_progress_bars
from agentgspo.models.tiny import tiny_policy_path
from agentgspo.core.chat import ChatRenderer

__all__ = [
    "is_hub_id",
    "resolve_checkpoint",
    "cached_snapshot",
    "parse_dtype",
    "check_attention",
    "load_tokenizer",
    "load_model",
    "model_folder",
    "stop_ids_of",
    "load_renderer_and_stops",
]

#: owner/name, as the hub spells repository ids (letters, digits, '-', '_', '.'; no leading '.' or '-').
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: transformers' attention implementations (``attn_implementation=``); None keeps the model's default.
ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")
#: decode(encode(x)) must give x back; a tokenizer whose pre-tokenizer was re-derived from ``tokenizer_class``
#: (transformers 5 over some byte-level BPE files) drops the spaces or the newlines here. ASCII only: a small
#: vocabulary (the tiny policy's characters) need not cover more.
ROUND_TRIP_PROBE = "Hello world!\n  def f(x):\n    return x ** 2  # two  spaces"


def is_hub_id(name: str) -> bool:
    """Whether ``name`` has the form of a hub repository id (``owner/name``)."""
    return bool(HUB_ID.match(name))


def resolve_checkpoint(policy: str | Path, *, cache_dir: str | Path | None = None) -> Path:
    """The model folder ``policy`` names: ``"tiny"``, an existing folder, or a hub id found in the local cache.

    A path that exists wins over a hub id of the same spelling. ``cache_dir`` overrides huggingface_hub's cache
    (``HF_HUB_CACHE`` / ``HF_HOME``). Raises ``FileNotFoundError`` for a hub id that is not cached (naming the
    download command and the cache searched) and the errors of :func:`model_folder` for
    anything else that is not a model folder.
    """
    text = str(policy)
    if text != "tiny" and not Path(text).exists() and is_hub_id(text):
        return model_folder(cached_snapshot(text, cache_dir=cache_dir))
    return model_folder(text)


def cached_snapshot(repo_id: str, *, revision: str | None = None, cache_dir: str | Path | None = None) -> Path:
    """The folder of ``repo_id``'s cached snapshot (``revision``: default branch), without touching the network."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = Path(cache_dir) if cache_dir is not None else Path(constants.HF_HUB_CACHE)
    try:
        return Path(snapshot_download(repo_id, revision=revision, cache_dir=str(cache), local_files_only=True))
    except LocalEntryNotFoundError:
        raise FileNotFoundError(
            f"policy {repo_id!r} looks like a Hugging Face hub id but is not in the local cache {str(cache)!r}. "
            f"Download it first (`huggingface-cli download {repo_id}`, or `hf download {repo_id}`), point HF_HOME "
            "(or HF_HUB_CACHE) at the cache that holds it, or pass a local folder written by save_pretrained"
        ) from None


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``"float32"``, ``"bfloat16"``, ``"float16"`` (or a torch dtype) as a torch dtype; else a clear error."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


def check_attention(attn_implementation: str | None) -> str | None:
    """``attn_implementation`` if transformers knows it (or None); else an error naming the accepted ones."""
    if attn_implementation is not None and attn_implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(
            f"attention implementation {attn_implementation!r}: expected one of "
            f"{', '.join(ATTENTION_IMPLEMENTATIONS)} (or none: the model's default)"
        )
    return attn_implementation


def load_tokenizer(folder: str | Path) -> Any:
    """The checkpoint's tokenizer, checked to round-trip text (``decode(encode(x)) == x``).

    ``AutoTokenizer`` first; when it does not round-trip and the folder ships ``tokenizer.json``, the file's own
    pipeline through ``PreTrainedTokenizerFast`` (transformers 5 may re-derive a byte-level BPE's pre-tokenizer
    and decoder from ``tokenizer_class`` and lose spaces). Raises ``ValueError`` when neither round-trips.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = Path(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if _round_trips(tokenizer):
        return tokenizer
    if (folder / "tokenizer.json").is_file():
        fast = PreTrainedTokenizerFast.from_pretrained(folder)
        if _round_trips(fast):
            return fast
    raise ValueError(
        f"tokenizer in {str(folder)!r} does not give text back: decode(encode({ROUND_TRIP_PROBE!r})) "
        f"== {tokenizer.decode(_encode(tokenizer, ROUND_TRIP_PROBE))!r}; training on it would "
        "corrupt every turn. Check its tokenizer.json pre-tokenizer and decoder"
    )


def _encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def _round_trips(tokenizer: Any) -> bool:
    return tokenizer.decode(_encode(tokenizer, ROUND_TRIP_PROBE)) == ROUND_TRIP_PROBE


def load_model(
    folder: str | Path,
    *,
    dtype: str | torch.dtype = torch.float32,
    device: str = "cpu",
    attn_implementation: str | None = None,
    experts_implementation: str | None = None,
) -> Any:
    """The checkpoint's causal LM on ``device`` with parameters in ``dtype``, in eval mode.

    ``attn_implementation``: one of :data:`ATTENTION_IMPLEMENTATIONS` (None: transformers' default).
    ``experts_implementation``: how an MoE computes its experts (transformers' names, or ``"agentgspo"``:
    grouped GEMMs with a deterministic backward, :mod:`agentgspo.models.moe`); None keeps transformers' default.
    """
    from transformers import AutoModelForCausalLM

    options: dict[str, Any] = {"dtype": parse_dtype(dtype)}
    if check_attention(attn_implementation) is not None:
        options["attn_implementation"] = attn_implementation
    if experts_implementation is not None:
        if experts_implementation == "agentgspo":
            register_experts_implementation()
        options["experts_implementation"] = experts_implementation
    with no_transformers_progress_bars():
        return AutoModelForCausalLM.from_pretrained(folder, **options).to(device).eval()


# ----------------------------------------------------------------------------------------------- names

POLICY_NAMES = {"tiny": "the embedded tiny MoE", "oracle": "the env's scripted expert (agentgspo rollout)"}
MODEL_FOLDER_HOLDS = (
    "config.json, the weights (model.safetensors) and the tokenizer (tokenizer.json, "
    "tokenizer_config.json), as written by save_pretrained"
)


def model_folder(policy: str | Path) -> Path:
    """The model folder ``policy`` names (``"tiny"``: the embedded policy, built on first use).

    Raises ``FileNotFoundError`` naming the close names and the accepted forms for a name that is neither, and
    ``ValueError`` for a folder that holds no model (naming what a model folder holds, and ``final/`` under a
    run folder).
    """
    text = str(policy)
    if text == "tiny":
        return tiny_policy_path()
    path = Path(text)
    accepted = ", ".join(f"'{name}' ({what})" for name, what in POLICY_NAMES.items())
    if not path.exists():
        if is_hub_id(text):  # owner/name: its snapshot in the local Hugging Face cache, else an error naming the fix
            return model_folder(cached_snapshot(text))
        close = difflib.get_close_matches(text, list(POLICY_NAMES), n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise FileNotFoundError(
            f"policy {text!r}: no such name or folder.{hint} Expected {accepted}, or a model "
            f"folder holding {MODEL_FOLDER_HOLDS}"
        )
    if not path.is_dir():
        raise ValueError(f"policy {text!r} is a file; pass the folder that holds {MODEL_FOLDER_HOLDS}")
    if not (path / "config.json").is_file():
        trained = path / "final"
        hint = (
            f" This looks like a run folder: its trained policy is {str(trained)!r}."
            if (trained / "config.json").is_file()
            else ""
        )
        raise ValueError(
            f"policy folder {text!r} holds no model (no config.json).{hint} A model folder holds {MODEL_FOLDER_HOLDS}"
        )
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise ValueError(
            f"policy folder {text!r} holds a model but no tokenizer: save it there too "
            "(tokenizer.save_pretrained(folder)); a model folder holds " + MODEL_FOLDER_HOLDS
        )
    return path


def stop_ids_of(tokenizer: Any, generation_config: Any = None) -> list[int]:
    """Every id that ends a turn for this tokenizer: its eos token and the generation config's eos id(s)
    (``generation_config``: a ``transformers.GenerationConfig``, ``None`` where the model has none)."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    eos = None if generation_config is None else generation_config.eos_token_id
    ids.extend(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])
    return sorted(set(ids))


def load_renderer_and_stops(path: Path) -> tuple[ChatRenderer, list[int]]:
    """The chat renderer of the checkpoint's tokenizer and every id that ends a turn (see :func:`stop_ids_of`):
    what a backend that samples elsewhere (the vLLM engine, servers) needs of the checkpoint."""
    from transformers import GenerationConfig

    tokenizer = load_tokenizer(path)
    try:
        generation_config = GenerationConfig.from_pretrained(path)
    except OSError:  # no generation_config.json
        generation_config = None
    renderer = ChatRenderer(tokenizer)
    return renderer, sorted({renderer.end_of_turn_id, *stop_ids_of(tokenizer, generation_config)})
