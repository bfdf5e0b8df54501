"""Write tests/interop/fixtures/hf_config_keys.json: what transformers' config classes read.

minipt exports ``config.json`` for ``GPT2LMHeadModel`` and ``LlamaForCausalLM``. A key that
transformers does not know (``n_ctx``, ``layer_norm_eps``, ``rms_norm_epsilon``) is kept
silently as a stray attribute and the model is built with the class default instead: the
export loads, and computes something else. This script records, from transformers itself
and independently of minipt, for ``GPT2Config`` and ``LlamaConfig``:

- ``keys``: every key of a default config's ``to_dict()`` (what transformers writes and reads);
- ``init_params``: the named parameters of the class's ``__init__``;
- ``attribute_map``: alias -> attribute (GPT-2's ``hidden_size`` -> ``n_embd`` ...);
- ``defaults``: the default ``to_dict()`` values (JSON-able);
- ``legacy``: older keys transformers 5 no longer writes but still reads, each probed with a
  value and the place it lands (``rope_theta`` -> ``rope_parameters.rope_theta``);
- ``stray_key_kept``: the proof that an unknown key is accepted without a word.

Run once, by hand, where transformers is installed (torch is not needed by the test):

    /work/hfvenv/bin/python scripts/make_hf_config_keys.py
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import transformers
from transformers import GPT2Config, LlamaConfig

OUT = Path(__file__).resolve().parent.parent / "tests" / "interop" / "fixtures" / "hf_config_keys.json"
CLASSES = {"gpt2": GPT2Config, "llama": LlamaConfig}
# older spellings that configs on the hub still carry; each is probed, kept only if read
LEGACY_PROBES = {"rope_theta": 5000.0, "torch_dtype": "float16", "n_ctx": 7, "rope_scaling": None}


def jsonable(value):
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def find(d: dict, value, prefix: str = "") -> list[str]:
    """Dotted paths in ``d`` where ``value`` stands."""
    paths = []
    for k, v in d.items():
        if isinstance(v, dict):
            paths += find(v, value, f"{prefix}{k}.")
        elif v == value and type(v) is type(value):
            paths.append(prefix + k)
    return paths


def legacy(cls) -> dict:
    base = jsonable(cls().to_dict())
    found = {}
    for key, probe in LEGACY_PROBES.items():
        if probe is None or key in base:
            continue
        got = jsonable(cls.from_dict({key: probe}).to_dict())
        for path in find(got, probe):
            if path != key and path.split(".")[0] in base:
                found[key] = {"probe": probe, "reads_into": path}
    return found


def describe(cls) -> dict:
    default = cls()
    stray = cls.from_dict({"no_such_option_xyz": 3})
    return {
        "class": cls.__name__,
        "keys": sorted(default.to_dict()),
        "init_params": [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "kwargs")],
        "attribute_map": dict(cls.attribute_map),
        "defaults": jsonable(default.to_dict()),
        "legacy": legacy(cls),
        "stray_key_kept": getattr(stray, "no_such_option_xyz", None) == 3,
    }


def main() -> None:
    data = {"transformers_version": transformers.__version__,
            "written_by": "scripts/make_hf_config_keys.py",
            "model_types": {name: describe(cls) for name, cls in CLASSES.items()}}
    data["model_types"]["gpt2"]["defaults"].pop("transformers_version", None)
    data["model_types"]["llama"]["defaults"].pop("transformers_version", None)
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
