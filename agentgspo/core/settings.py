"""The settings vocabulary: a documented dataclass becomes a command line.

A recipe's settings are one dataclass whose fields carry a default and a help text (:func:`setting`, or
``field(metadata={"help": ...})``); the training config inherits the learner's
(:class:`agentgspo.learning.config.LearnerConfig`), so each setting is declared once. This module turns such a class
into a command line and back:

- :func:`add_settings`: ``--smoke``, ``--config FILE.yaml`` and one ``--flag`` per field (help text and default
  shown; ``X | None`` reads an empty value as ``None``; ``bool`` reads true/false, and a bare ``--flag`` as true;
  ``dict``, ``list`` and ``tuple`` read JSON; ``Literal`` lists its choices);
- :func:`config_from_args` / :func:`load_config`: the values in layers, each over the one before: the class's
  defaults, the recipe's ``defaults``, ``--smoke``'s, the YAML file's (unknown keys refused naming the closest
  setting), the flags given;
- :func:`check_settings`: each value within what its setting declares (``choices``, a ``Literal``, ``at_least``);
- a recipe's defaults are data (a mapping of setting names), layered over the class's, not a class of their own;
- :func:`resume_command`: the command that continues a run (the settings that differ from the defaults, testing
  aids left out); :func:`resumable_settings`: those a rerun may change and still resume.

Why not a parser library: ``transformers.HfArgumentParser`` (the closest fit, already a dependency) gives a
``dict`` field no parser (``--env-kwargs '{...}'`` fails), cannot read an empty value as ``None``, takes lists as
space-separated words (``--held-out a b``, not the JSON every other setting uses), and rewrites the dataclass's
field types in place; tyro and simple-parsing would add a dependency and change the flags' syntax users already
have in their scripts. argparse plus the ~100 lines below keep one syntax for flags and YAML.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import json
import shlex
import typing
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "setting",
    "flag",
    "flags_of",
    "resumable_settings",
    "default_of",
    "choices_of",
    "check_settings",
    "optional_inner",
    "add_settings",
    "check_defaults",
    "config_from_args",
    "load_config",
    "read_yaml",
    "resume_command",
]


def setting(
    default: Any,
    help: str,  # noqa: A002
    *,
    resumable: bool = False,
    testing: bool = False,
    choices: typing.Sequence[Any] | None = None,
    at_least: float | None = None,
) -> Any:
    """A config field with its help text (shown by ``--help``) and what it accepts, checked by
    :func:`check_settings` (a ``Literal`` type's values are accepted as its choices without ``choices``).

    Args:
        default: the default (a dict or list is copied for each instance).
        help: what the setting does, its unit and what 0 or empty means.
        resumable: the setting does not change what a run computes (its folder, a time cap, how often it saves):
            a rerun may change it and still resume the run.
        testing: a testing aid: resumable, and left out of the command that resumes.
        choices: the values it accepts (the flag lists them).
        at_least: its smallest value (``None`` stays accepted for an ``X | None`` setting).
    """
    metadata = {"help": help, "resumable": resumable or testing, "testing": testing}
    if choices is not None:
        metadata["choices"] = tuple(choices)
    if at_least is not None:
        metadata["at_least"] = at_least
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: json.loads(json.dumps(default)), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def choices_of(spec: dataclasses.Field, kind: Any) -> tuple[Any, ...] | None:
    """The values setting ``spec`` (typed ``kind``) accepts: its declared ``choices``, its ``Literal``'s values, or
    ``None`` (any value of its type)."""
    inner = optional_inner(kind) or kind
    if typing.get_origin(inner) is Literal:
        return typing.get_args(inner)
    return spec.metadata.get("choices")


def check_settings(config: Any) -> None:
    """Refuse a value outside what its setting declares (:func:`setting`'s ``choices``, a ``Literal``, ``at_least``),
    naming the setting, what it accepts and the value: a dataclass builds from any keyword, and YAML or Python
    callers skip the flags' checks."""
    kinds = typing.get_type_hints(type(config))
    for spec in dataclasses.fields(config):
        value = getattr(config, spec.name)
        if value is None and optional_inner(kinds[spec.name]) is not None:
            continue
        allowed = choices_of(spec, kinds[spec.name])
        if allowed is not None and value not in allowed:
            raise ValueError(f"{spec.name}: expected one of {', '.join(map(str, allowed))}, got {value!r}")
        least = spec.metadata.get("at_least")
        if least is not None and not value >= least:
            raise ValueError(f"{spec.name}: expected >= {least:g}, got {value}")


def flag(name: str) -> str:
    """The command-line flag of setting ``name``: ``eps_low`` -> ``--eps-low``."""
    return "--" + name.replace("_", "-")


def flags_of(config_class: type) -> dict[str, str]:
    """Setting name -> its flag, for every field of ``config_class``."""
    return {spec.name: flag(spec.name) for spec in dataclasses.fields(config_class)}


def resumable_settings(config_class: type) -> tuple[str, ...]:
    """The settings a rerun may change and still resume the run (declared ``resumable`` or ``testing``)."""
    return tuple(spec.name for spec in dataclasses.fields(config_class) if spec.metadata.get("resumable"))


def default_of(spec: dataclasses.Field) -> Any:
    """A field's default value (a fresh copy for a ``default_factory``)."""
    return spec.default_factory() if spec.default is dataclasses.MISSING else spec.default


def _closest(name: str, names: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def optional_inner(kind: Any) -> Any:
    """``X`` for a field typed ``X | None``, else ``None``."""
    args = typing.get_args(kind)
    if len(args) == 2 and type(None) in args:
        return next(arg for arg in args if arg is not type(None))
    return None


def _from_text(kind: Any, text: str) -> Any:
    """A flag's text as a value of ``kind`` (raises ``ValueError`` naming what was expected)."""
    inner = optional_inner(kind)
    if inner is not None:
        return None if text.strip().lower() in ("", "none", "null") else _from_text(inner, text)
    if kind is bool:
        lowered = text.lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"expected true or false, got {text!r}")
        return lowered in ("true", "1", "yes")
    origin = typing.get_origin(kind) or kind
    if origin in (dict, list, tuple):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"expected a JSON {_json_name(origin)}, got {text!r} ({exc})") from None
        return _checked(kind, value)
    if origin is Literal:
        return _checked(kind, text)
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"expected {kind.__name__}, got {text!r}") from None


def _json_name(origin: type) -> str:
    return "object" if origin is dict else 'list (e.g. \'["a", "b"]\')'


def _checked(kind: Any, value: Any) -> Any:
    """``value`` (from JSON or YAML) as ``kind``: a number read as text by YAML 1.1 (``1e-6``) becomes a float, a
    list a tuple; anything else of the wrong type raises ``ValueError`` naming what was expected."""
    inner = optional_inner(kind)
    if inner is not None:
        return None if value is None else _checked(inner, value)
    origin = typing.get_origin(kind) or kind
    if origin is Literal:
        if value not in typing.get_args(kind):
            raise ValueError(f"expected one of {', '.join(map(str, typing.get_args(kind)))}, got {value!r}")
        return value
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if kind is float and isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"expected a number, got {value!r}") from None
    if not isinstance(value, origin) or (origin is int and isinstance(value, bool)):
        name = _json_name(origin) if origin in (dict, list, tuple) else origin.__name__
        raise ValueError(f"expected {name}, got {value!r}")
    return value


def _argparse_type(kind: Any) -> Any:
    def parse(text: str) -> Any:
        try:
            return _from_text(kind, text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    inner = optional_inner(kind) or kind
    parse.__name__ = getattr(typing.get_origin(inner) or inner, "__name__", "value")  # argparse's "invalid X value"
    return parse


def add_settings(
    parser: argparse.ArgumentParser, config_class: type, defaults: typing.Mapping[str, Any] | None = None
) -> None:
    """``--smoke``, ``--config FILE.yaml`` and one ``--flag`` per field of ``config_class`` (its help text, its
    default shown: the recipe's ``defaults`` where they name it). A flag not given stays out of the parsed namespace,
    so :func:`config_from_args` can layer."""
    defaults = check_defaults(config_class, defaults)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a CPU size on the tiny policy that runs in a minute (the test suite runs it)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE.yaml",
        help="settings from a YAML mapping of setting names; command-line flags override them",
    )
    kinds = typing.get_type_hints(config_class)
    for spec in dataclasses.fields(config_class):
        default = defaults[spec.name] if spec.name in defaults else default_of(spec)
        shown = json.dumps(default) if isinstance(default, (dict, list, tuple)) else default
        choices = choices_of(spec, kinds[spec.name])
        switch = (optional_inner(kinds[spec.name]) or kinds[spec.name]) is bool  # a bare --flag means true
        parser.add_argument(
            flag(spec.name),
            dest=spec.name,
            type=_argparse_type(kinds[spec.name]),
            choices=choices,
            default=argparse.SUPPRESS,
            help=f"{spec.metadata['help']} (default: {shown})",
            **({"nargs": "?", "const": True, "metavar": "true|false"} if switch else {}),
        )


def check_defaults(config_class: type, defaults: typing.Mapping[str, Any] | None) -> dict[str, Any]:
    """A recipe's ``defaults`` (setting name -> value), each a setting of ``config_class`` (an unknown name is refused
    naming the closest one)."""
    defaults = dict(defaults or {})
    names = flags_of(config_class)
    for name in defaults:
        if name not in names:
            raise ValueError(f"{config_class.__name__} has no setting {name!r}{_closest(name, names)}")
    return defaults


def config_from_args(
    config_class: type,
    args: dict[str, Any],
    *,
    defaults: typing.Mapping[str, Any] | None = None,
    smoke: dict[str, Any] | None = None,
) -> Any:
    """The settings from a namespace :func:`add_settings` filled: the class's defaults, then the recipe's
    ``defaults``, then ``smoke`` (with ``--smoke``), then the YAML file of ``--config``, then the flags given."""
    args = dict(args)
    values = copy.deepcopy(check_defaults(config_class, defaults))  # a run may change its dicts
    if args.pop("smoke", False):
        values.update(smoke or {})
    config_file = args.pop("config", None)
    if config_file:
        values.update(read_yaml(config_file, config_class))
    values.update(args)
    return config_class(**values)


def load_config(
    config_class: type,
    argv: list[str] | None = None,
    *,
    defaults: typing.Mapping[str, Any] | None = None,
    smoke: dict[str, Any] | None = None,
    description: str = "",
) -> Any:
    """Parse ``argv`` (the command line by default) into ``config_class`` (see :func:`config_from_args`)."""
    parser = argparse.ArgumentParser(description=description)
    add_settings(parser, config_class, defaults)
    return config_from_args(config_class, vars(parser.parse_args(argv)), defaults=defaults, smoke=smoke)


def read_yaml(path: str | Path, config_class: type) -> dict[str, Any]:
    """The settings of a YAML mapping, each checked against its field's type; an unknown key is refused naming the
    closest setting."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--config {path}: cannot read it as YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}: expected a mapping of setting names to values, got {type(data).__name__}")
    kinds, names = typing.get_type_hints(config_class), flags_of(config_class)
    values = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in names:
            raise ValueError(f"--config {path}: unknown setting {key!r}{_closest(name, names)}")
        try:
            values[name] = _checked(kinds[name], value)
        except ValueError as exc:
            raise ValueError(f"--config {path}: {key}: {exc}") from None
    return values


def resume_command(config: Any, command: str, defaults: typing.Mapping[str, Any] | None = None) -> str:
    """The command that continues this run: ``command`` with ``--out`` and every setting that differs from its
    default (the recipe's ``defaults``, else the config class's; testing aids left out)."""
    baseline = dataclasses.asdict(type(config)(**copy.deepcopy(check_defaults(type(config), defaults))))
    values = dataclasses.asdict(config)
    parts = [flag("out"), config.out]
    for spec in dataclasses.fields(config):
        value = values[spec.name]
        if spec.name != "out" and not spec.metadata.get("testing") and value != baseline[spec.name]:
            parts += [flag(spec.name), value if isinstance(value, str) else json.dumps(value)]
    return " ".join([command, *map(shlex.quote, parts)])
