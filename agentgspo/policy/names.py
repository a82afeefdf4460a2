"""What a ``--policy`` value may name: ``tiny`` (the embedded tiny MoE), ``oracle`` (the env's scripted expert,
in commands that play an env) or a model folder; a clear error for anything else."""

from __future__ import annotations

import difflib
from pathlib import Path

POLICY_NAMES = {"tiny": "the embedded tiny MoE", "oracle": "the env's scripted expert (agentgspo rollout)"}
MODEL_FOLDER_HOLDS = ("config.json, the weights (model.safetensors) and the tokenizer (tokenizer.json, "
                      "tokenizer_config.json), as written by save_pretrained")


def model_folder(policy: str | Path) -> Path:
    """The model folder ``policy`` names (``"tiny"``: the embedded policy, built on first use).

    Raises ``FileNotFoundError`` naming the close names and the accepted forms for a name that is neither, and
    ``ValueError`` for a folder that holds no model (naming what a model folder holds, and ``final/`` under a
    run folder).
    """
    text = str(policy)
    if text == "tiny":
        from agentgspo.policy.tiny import tiny_policy_path

        return tiny_policy_path()
    path = Path(text)
    accepted = ", ".join(f"'{name}' ({what})" for name, what in POLICY_NAMES.items())
    if not path.exists():
        from agentgspo.policy.loading import cached_snapshot, is_hub_id

        if is_hub_id(text):  # owner/name: its snapshot in the local Hugging Face cache, else an error naming the fix
            return model_folder(cached_snapshot(text))
        close = difflib.get_close_matches(text, list(POLICY_NAMES), n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise FileNotFoundError(f"policy {text!r}: no such name or folder.{hint} Expected {accepted}, or a model "
                                f"folder holding {MODEL_FOLDER_HOLDS}")
    if not path.is_dir():
        raise ValueError(f"policy {text!r} is a file; pass the folder that holds {MODEL_FOLDER_HOLDS}")
    if not (path / "config.json").is_file():
        trained = path / "final"
        hint = f" This looks like a run folder: its trained policy is {str(trained)!r}." \
            if (trained / "config.json").is_file() else ""
        raise ValueError(f"policy folder {text!r} holds no model (no config.json).{hint} A model folder holds "
                         f"{MODEL_FOLDER_HOLDS}")
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise ValueError(f"policy folder {text!r} holds a model but no tokenizer: save it there too "
                         "(tokenizer.save_pretrained(folder)); a model folder holds " + MODEL_FOLDER_HOLDS)
    return path
