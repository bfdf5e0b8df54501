"""Reading and writing a transformers ``config.json``, with errors that name the option.

A ``config.json`` is a flat JSON object of hyper-parameters; ``model_type`` says which
model class reads it. A key that is absent takes the default of that model's config
class (``GPT2Config``, ``LlamaConfig``, ``OpenAIGPTConfig``), so the readers here take the same defaults.
Everything that changes what the network computes is either mapped onto a ``GPTConfig``
field or checked against the one value minipt implements; anything else is a
``ValueError`` naming the option, never a silently different model.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..core.checks import check_positive_int

CONFIG = "config.json"


def read_config(folder) -> dict:
    """The parsed ``config.json`` of a folder (an object with a ``model_type``)."""
    folder = Path(folder)
    if not folder.exists():
        raise FileNotFoundError(f"no folder {folder}")
    if not folder.is_dir():
        raise ValueError(f"{folder} is a file; pass the folder that holds config.json and model.safetensors")
    path = folder / CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no {CONFIG}; a transformers folder holds config.json "
                                "and model.safetensors")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(config).__name__}")
    if "model_type" not in config:
        raise ValueError(f"{path} has no 'model_type'; cannot tell which architecture it describes")
    return config


def get_int(config: dict, key: str, default: int | None = None) -> int:
    """A positive integer option (``default`` when absent; required when default is None)."""
    value = config.get(key, default)
    if value is None:
        raise ValueError(f"config.json: missing {key!r}")
    return check_positive_int(f"config.json: {key}", value)


def get_float(config: dict, key: str, default: float) -> float:
    value = config.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(f"config.json: {key} must be a number, got {value!r}")
    return float(value)


def get_bool(config: dict, key: str, default: bool) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"config.json: {key} must be true or false, got {value!r}")
    return value


def expect(config: dict, key: str, allowed, default, why: str):
    """The option's value if it is one of ``allowed``; otherwise a ValueError naming it."""
    value = config.get(key, default)
    if value not in allowed:
        raise ValueError(f"config.json: {key} = {value!r} is not supported: {why}")
    return value


def check_architectures(config: dict, accepted: tuple[str, ...]) -> None:
    """``architectures`` (when present) must name one of ``accepted`` classes."""
    archs = config.get("architectures") or []
    if archs and not any(a in accepted for a in archs):
        raise ValueError(f"config.json: architectures {archs} is not a class minipt reads for model_type "
                         f"{config['model_type']!r} (it reads {', '.join(accepted)})")


def write_config(folder, config: dict) -> None:
    Path(folder, CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
