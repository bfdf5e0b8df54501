"""Bad folders and unexportable models: clear errors naming the tensor or option, and a
failed export leaves nothing behind."""
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from minipt.interop import from_pretrained, pretrained, save_pretrained
from minipt.interop.cli_commands import load_hf_for_sampling
from minipt.interop.safetensors_io import read_file, write_tensors
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.models.decoder.llama import llama_config  # noqa: E402
from minipt.tokenizers import ByteBPETokenizer

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SMALL = dict(vocab_size=40, block_size=12, n_layer=2, n_head=2, d_model=16)


def copy(arch: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / arch, tmp_path / arch))


def edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def edit_tensors(folder: Path, fn) -> None:
    tensors, _ = read_file(folder / "model.safetensors")
    write_tensors(folder / "model.safetensors", fn(tensors))


def test_other_architecture(tmp_path):
    folder = copy("gpt2", tmp_path)
    edit_config(folder, model_type="gpt_neox", architectures=["GPTNeoXForCausalLM"])
    with pytest.raises(ValueError, match=r"model_type 'gpt_neox' is not supported; minipt reads gpt2 \(GPT2LMHeadModel\)"):
        from_pretrained(folder)
    folder = copy("llama", tmp_path)
    edit_config(folder, architectures=["LlamaForSequenceClassification"])
    with pytest.raises(ValueError, match="LlamaForSequenceClassification"):
        from_pretrained(folder)
    folder = copy("openai-gpt", tmp_path)
    edit_config(folder, architectures=["OpenAIGPTDoubleHeadsModel"])
    with pytest.raises(ValueError, match=r"OpenAIGPTDoubleHeadsModel.*model_type 'openai-gpt' "
                                         r"\(it reads OpenAIGPTLMHeadModel"):
        from_pretrained(folder)


def test_missing_tensor(tmp_path):
    folder = copy("llama", tmp_path)
    edit_tensors(folder, lambda t: {k: v for k, v in t.items() if k != "model.layers.1.self_attn.k_proj.weight"})
    with pytest.raises(ValueError, match=r"tensor model\.layers\.1\.self_attn\.k_proj\.weight \(32, 32\) is missing"):
        from_pretrained(folder)


def test_extra_tensor(tmp_path):
    folder = copy("gpt2", tmp_path)
    edit_tensors(folder, lambda t: {**t, "transformer.h.2.ln_1.weight": np.ones(32)})
    with pytest.raises(ValueError, match=r"tensor transformer\.h\.2\.ln_1\.weight \(32,\) is not part of a GPT2LMHeadModel"):
        from_pretrained(folder)


def test_shape_disagrees_with_config(tmp_path):
    folder = copy("gpt2", tmp_path)
    edit_config(folder, n_positions=32)
    with pytest.raises(ValueError, match=r"tensor transformer\.wpe\.weight has shape \(16, 32\), but config\.json "
                                         r"implies \(32, 32\)"):
        from_pretrained(folder)
    folder = copy("llama", tmp_path)
    edit_config(folder, intermediate_size=64)
    with pytest.raises(ValueError, match=r"model\.layers\.0\.mlp\.gate_proj\.weight has shape \(48, 32\)"):
        from_pretrained(folder)
    folder = copy("openai-gpt", tmp_path)
    edit_config(folder, n_embd=64, n_head=4)
    with pytest.raises(ValueError, match=r"transformer\.tokens_embed\.weight has shape \(64, 32\), but config\.json "
                                         r"implies \(64, 64\)"):
        from_pretrained(folder)


def test_gpt1_file_with_gpt2_parts(tmp_path):
    """A final LayerNorm (GPT-2's ln_f) has no place in OpenAIGPT; a missing transposed
    matrix is named with the shape it must have."""
    folder = copy("openai-gpt", tmp_path)
    edit_tensors(folder, lambda t: {**t, "transformer.ln_f.weight": np.ones(32)})
    with pytest.raises(ValueError, match=r"tensor transformer\.ln_f\.weight \(32,\) is not part of an? "
                                         r"OpenAIGPTLMHeadModel"):
        from_pretrained(folder)
    folder = copy("openai-gpt", tmp_path / "2")
    edit_tensors(folder, lambda t: {k: v for k, v in t.items() if k != "transformer.h.0.mlp.c_fc.weight"})
    with pytest.raises(ValueError, match=r"tensor transformer\.h\.0\.mlp\.c_fc\.weight \(32, 128\) is missing"):
        from_pretrained(folder)
    folder = copy("openai-gpt", tmp_path / "3")
    edit_tensors(folder, lambda t: {**t, "transformer.h.1.attn.c_proj.weight": np.zeros((32, 33))})
    with pytest.raises(ValueError, match=r"transformer\.h\.1\.attn\.c_proj\.weight has shape \(32, 33\)"):
        from_pretrained(folder)


def test_tied_config_with_a_different_head(tmp_path):
    folder = copy("gpt2", tmp_path)
    edit_tensors(folder, lambda t: {**t, "lm_head.weight": t["transformer.wte.weight"] * 2})
    with pytest.raises(ValueError, match="lm_head.weight differs"):
        from_pretrained(folder)
    edit_tensors(folder, lambda t: {**t, "lm_head.weight": t["transformer.wte.weight"].copy()})   # equal: accepted
    from_pretrained(folder)


@pytest.mark.parametrize("arch, changes, option", [
    ("gpt2", dict(activation_function="relu"), "activation_function"),
    ("gpt2", dict(activation_function="gelu"), "activation_function"),
    ("gpt2", dict(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx"),
    ("gpt2", dict(scale_attn_weights=False), "scale_attn_weights"),
    ("gpt2", dict(add_cross_attention=True), "add_cross_attention"),
    ("gpt2", dict(attn_pdrop=0.1), "dropout rates"),
    ("gpt2", dict(n_embd=30), "divisible"),
    ("gpt2", dict(n_layer=0), "n_layer must be an integer >= 1"),
    ("llama", dict(num_key_value_heads=2), "grouped-query attention"),
    ("llama", dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), "rope_scaling"),
    ("llama", dict(rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0}), "rope_parameters"),
    ("llama", dict(rope_parameters={"rope_type": "default", "rope_theta": 500000.0}), "rope_theta"),
    ("llama", dict(rope_theta=500000.0, rope_parameters=None), "rope_theta"),
    ("llama", dict(hidden_act="gelu"), "hidden_act"),
    ("llama", dict(head_dim=16), "head_dim"),
    ("llama", dict(pretraining_tp=2), "pretraining_tp"),
    ("llama", dict(attention_bias=True), "attention_bias"),
    ("llama", dict(attention_dropout=0.1), "attention_dropout"),
    ("openai-gpt", dict(afn="silu"), "afn = 'silu'"),
    ("openai-gpt", dict(afn="gelu_new"), "afn = 'gelu_new'"),
    ("openai-gpt", dict(n_ctx=8), "n_ctx = 8 differs from n_positions = 16"),
    ("openai-gpt", dict(n_special=2), "n_special = 2"),
    ("openai-gpt", dict(embd_pdrop=0.1), "dropout rates"),
    ("openai-gpt", dict(n_head=5), "divisible"),
    ("openai-gpt", dict(n_positions=0), "n_positions must be an integer >= 1"),
    ("openai-gpt", dict(tie_word_embeddings="yes"), "tie_word_embeddings must be true or false"),
])
def test_unsupported_option_is_named(arch, changes, option, tmp_path):
    folder = copy(arch, tmp_path)
    edit_config(folder, **changes)
    with pytest.raises(ValueError, match=f"config.json: .*{option}"):
        from_pretrained(folder)


def test_pickle_folder_is_refused(tmp_path):
    folder = tmp_path / "torch"
    folder.mkdir()
    shutil.copy(FIXTURES / "gpt2" / "config.json", folder)
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x02}q\x00.")         # a pickle's first bytes
    with pytest.raises(ValueError, match=r"pytorch_model\.bin .*pickle.*never unpickles"):
        from_pretrained(folder)
    (folder / "pytorch_model.bin").unlink()
    with pytest.raises(FileNotFoundError, match="holds no model.safetensors"):
        from_pretrained(folder)


def test_damaged_or_foreign_files(tmp_path):
    folder = copy("gpt2", tmp_path)
    (folder / "model.safetensors").write_bytes(b"\x80\x02}q\x00." * 10)
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        from_pretrained(folder)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        from_pretrained(folder)
    (folder / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        from_pretrained(folder)
    with pytest.raises(FileNotFoundError, match="no folder"):
        from_pretrained(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="is a file"):
        from_pretrained(FIXTURES / "gpt2" / "config.json")


def test_bfloat16_is_named(tmp_path):
    folder = copy("gpt2", tmp_path)
    tensors, _ = read_file(folder / "model.safetensors")
    header, offset, data = {}, 0, b""
    for name in sorted(tensors):                       # a hand-made file: every tensor stored as BF16
        n = tensors[name].size * 2
        header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + n]}
        offset, data = offset + n, data + bytes(n)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + data)
    with pytest.raises(ValueError, match="has dtype BF16.*bfloat16"):
        from_pretrained(folder)


def test_shard_index_cannot_point_outside(tmp_path):
    folder = tmp_path / "evil"
    folder.mkdir()
    shutil.copy(FIXTURES / "gpt2" / "config.json", folder)
    index = {"weight_map": {"transformer.wte.weight": "../../elsewhere.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="not a .safetensors file name in the folder"):
        from_pretrained(folder)


@pytest.mark.parametrize("config, why", [
    (GPTConfig.gpt1(**SMALL, activation="gelu"), "activation='gelu': OpenAIGPTLMHeadModel's afn is 'gelu' "
                                                 r"\(the tanh approximation"),
    (GPTConfig.gpt1(**SMALL, d_ff=48), "d_ff=48: OpenAIGPTLMHeadModel's MLP width is 4 \\* d_model = 64"),
    (GPTConfig.gpt1(**SMALL, final_norm=True), "final_norm=True: OpenAIGPTLMHeadModel needs final_norm=False"),
    (GPTConfig.gpt1(**SMALL, bias=False), "; bias=False: OpenAIGPTLMHeadModel needs bias=True"),
    (GPTConfig.gpt2(**SMALL, prenorm=False, final_norm=False, norm="rms"), "norm='rms': OpenAIGPTLMHeadModel"),
    (GPTConfig.gpt3(**SMALL), "sparse_window=2"),
    (GPTConfig.gpt2(**SMALL, norm="rms"), "norm='rms'.*positions='learned'"),
    (GPTConfig.gpt2(**SMALL, activation="relu"), "activation='relu'"),
    (GPTConfig.gpt2(**SMALL, bias=False), "bias=False"),
    (GPTConfig.gpt2(**SMALL, final_norm=False), "final_norm=False"),
    (llama_config(**SMALL, positions="learned"), "positions='learned'"),
])
def test_unexportable_models_write_nothing(config, why, tmp_path):
    model = GPT(config, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=f"cannot export this model to transformers: .*{why}"):
        save_pretrained(model, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_failed_export_leaves_nothing(tmp_path, monkeypatch):
    model = GPT(GPTConfig.gpt2(**SMALL), rng=np.random.default_rng(0))

    def broken(folder, config):                        # fails after model.safetensors is written
        raise OSError("disk full")

    monkeypatch.setattr(pretrained, "write_config", broken)
    with pytest.raises(OSError, match="disk full"):
        save_pretrained(model, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("previous export")
    with pytest.raises(OSError, match="disk full"):
        save_pretrained(model, tmp_path / "out", overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]


def test_tokenizer_larger_than_the_model(tmp_path):
    tok = ByteBPETokenizer().fit("hello world", 3)                  # 256 bytes + <|endoftext|>
    model = GPT(GPTConfig.gpt2(**SMALL), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="tokenizer has 257 tokens but the model's vocab_size is 40"):
        save_pretrained(model, tmp_path / "out", tokenizer=tok)
    assert list(tmp_path.iterdir()) == []


def test_openai_gpt_tokenizer_is_named(tmp_path):
    """The openai-gpt release's own BPE (lowercased, word ends marked </w>) is not GPT-2's
    byte-level BPE: sampling from such a folder names it instead of mis-reading it."""
    folder = copy("openai-gpt", tmp_path)
    vocab = {"a": 0, "b": 1, "a</w>": 2, "b</w>": 3, "ab</w>": 4, "<unk>": 5}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\na b</w>\n")
    with pytest.raises(ValueError, match=r"vocab\.json: tokens ending in '</w>' are OpenAI GPT's BPE"):
        load_hf_for_sampling(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "OpenAIGPTTokenizer"}))
    with pytest.raises(ValueError, match="tokenizer_class 'OpenAIGPTTokenizer' is not a tokenizer minipt reads"):
        load_hf_for_sampling(folder)
