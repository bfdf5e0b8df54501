"""The config.json minipt exports says, in transformers' own words, the model minipt has.

transformers keeps an unknown key silently and builds the model from the class default
(``fixtures/hf_config_keys.json`` records it, ``stray_key_kept``), so a misspelt key
(``n_ctx``, ``layer_norm_eps``) loads fine and computes something else; a round trip
through minipt's own reader cannot see it. The reference is what ``GPT2Config`` and
``LlamaConfig`` of transformers 5.23.0 define (written once by
``scripts/make_hf_config_keys.py``, no minipt involved); no torch is needed here.
The last test loads the export with transformers itself, when it is installed.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from minipt.interop import save_pretrained
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.models.decoder.llama import llama_config

REF = json.loads((Path(__file__).parent / "fixtures" / "hf_config_keys.json").read_text())
SMALL = dict(vocab_size=37, block_size=24, n_layer=3, n_head=4, d_model=32)
CASES = {
    "gpt2": GPTConfig.gpt2(**SMALL, eps=2e-5),
    "gpt2-untied-dff": GPTConfig.gpt2(**SMALL, d_ff=48, tie_embeddings=False, eps=3e-5),
    "llama": llama_config(**SMALL, d_ff=40, eps=4e-6),
    "llama-tied-bias": llama_config(**SMALL, tie_embeddings=True, bias=True),
}


def exported(config: GPTConfig, tmp_path: Path, dtype=np.float64) -> dict:
    model = GPT(config, rng=np.random.default_rng(0), dtype=dtype)
    save_pretrained(model, tmp_path / "export")
    return json.loads((tmp_path / "export" / "config.json").read_text())


def read_as_transformers(hf: dict) -> dict:
    """The attributes transformers' config class ends up with, from the reference alone:
    defaults, overwritten by each known key (aliases through ``attribute_map``, legacy keys
    into the place they land). Unknown keys are returned apart."""
    ref = REF["model_types"][hf["model_type"]]
    seen = json.loads(json.dumps(ref["defaults"]))
    stray = []
    for key, value in hf.items():
        if key in ref["attribute_map"]:
            seen[ref["attribute_map"][key]] = value
        elif key in ref["keys"] or key in ref["init_params"]:
            if isinstance(value, dict) and isinstance(seen.get(key), dict):
                seen[key] = {**seen[key], **value}
            else:
                seen[key] = value
        elif key in ref["legacy"]:
            *path, last = ref["legacy"][key]["reads_into"].split(".")
            node = seen
            for p in path:
                node = node.setdefault(p, {})
            node[last] = value
        else:
            stray.append(key)
    return {"attrs": seen, "stray": stray}


def test_reference_was_made_by_transformers_and_unknown_keys_pass_silently():
    assert REF["transformers_version"] == "5.23.0"
    assert all(t["stray_key_kept"] for t in REF["model_types"].values())
    assert REF["model_types"]["gpt2"]["attribute_map"]["max_position_embeddings"] == "n_positions"


@pytest.mark.parametrize("name", list(CASES))
def test_every_exported_key_is_one_transformers_reads(name, tmp_path):
    hf = exported(CASES[name], tmp_path)
    stray = read_as_transformers(hf)["stray"]
    assert not stray, f"{hf['model_type']} config.json keys transformers does not read: {stray}"


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith("gpt2")])
def test_gpt2_config_values_as_transformers_reads_them(name, tmp_path):
    c = CASES[name]
    a = read_as_transformers(exported(c, tmp_path))["attrs"]
    assert a["model_type"] == "gpt2" and a["architectures"] == ["GPT2LMHeadModel"]
    assert (a["vocab_size"], a["n_positions"], a["n_embd"], a["n_layer"], a["n_head"]) == \
        (c.vocab_size, c.block_size, c.d_model, c.n_layer, c.n_head)
    assert (4 * c.d_model if a["n_inner"] is None else a["n_inner"]) == c.d_ff
    assert a["layer_norm_epsilon"] == c.eps
    assert a["activation_function"] in ("gelu_new", "gelu_pytorch_tanh")     # tanh GELU, minipt's gelu_tanh
    assert a["tie_word_embeddings"] is c.tie_embeddings
    assert a["scale_attn_weights"] is True and a["scale_attn_by_inverse_layer_idx"] is False
    assert a["add_cross_attention"] is False and a["reorder_and_upcast_attn"] is False
    assert a["attn_pdrop"] == a["resid_pdrop"] == a["embd_pdrop"] == c.dropout
    assert a["dtype"] == "float64"


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith("llama")])
def test_llama_config_values_as_transformers_reads_them(name, tmp_path):
    c = CASES[name]
    a = read_as_transformers(exported(c, tmp_path))["attrs"]
    assert a["model_type"] == "llama" and a["architectures"] == ["LlamaForCausalLM"]
    assert (a["vocab_size"], a["max_position_embeddings"], a["hidden_size"], a["num_hidden_layers"]) == \
        (c.vocab_size, c.block_size, c.d_model, c.n_layer)
    assert a["num_attention_heads"] == a["num_key_value_heads"] == c.n_head      # no grouped-query attention
    assert a["head_dim"] == c.d_model // c.n_head
    assert a["intermediate_size"] == c.d_ff and a["hidden_act"] == "silu"
    assert a["rms_norm_eps"] == c.eps
    assert a["rope_parameters"]["rope_type"] == "default" and a["rope_parameters"]["rope_theta"] == 10000.0
    assert a["attention_bias"] is c.bias and a["mlp_bias"] is c.bias
    assert a["attention_dropout"] == 0.0 and a["pretraining_tp"] == 1
    assert a["tie_word_embeddings"] is c.tie_embeddings
    assert a["dtype"] == "float64"


def test_float32_export_says_float32(tmp_path):
    a = read_as_transformers(exported(CASES["gpt2"], tmp_path, np.float32))["attrs"]
    assert a["dtype"] == "float32"


@pytest.mark.parametrize("name", list(CASES))
def test_transformers_reads_the_export(name, tmp_path):
    """The same claims, asked of transformers itself (skipped when it is not installed)."""
    transformers = pytest.importorskip("transformers")
    c = CASES[name]
    exported(c, tmp_path)
    t = transformers.AutoConfig.from_pretrained(tmp_path / "export")
    assert (t.vocab_size, t.max_position_embeddings, t.hidden_size, t.num_hidden_layers,
            t.num_attention_heads) == (c.vocab_size, c.block_size, c.d_model, c.n_layer, c.n_head)
    assert t.tie_word_embeddings is c.tie_embeddings
    if t.model_type == "gpt2":
        assert (t.n_inner or 4 * t.n_embd) == c.d_ff and t.layer_norm_epsilon == c.eps
    else:
        assert t.intermediate_size == c.d_ff and t.rms_norm_eps == c.eps and t.num_key_value_heads == c.n_head
        assert t.rope_parameters["rope_theta"] == 10000.0 and t.attention_bias is c.bias
