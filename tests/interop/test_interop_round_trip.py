"""minipt -> transformers folder -> minipt is bitwise identical; export of training runs."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from minipt.core.checkpoint import save_checkpoint
from minipt.inference.decoding import SamplingConfig, generate
from minipt.interop import from_pretrained, save_pretrained, their_named
from minipt.interop.cli_commands import export_checkpoint, load_hf_for_sampling
from minipt.interop.safetensors_io import read_file, write_tensors
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.models.decoder.llama import llama_config  # noqa: E402
from minipt.tokenizers import ByteBPETokenizer, CharTokenizer

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SMALL = dict(vocab_size=40, block_size=12, n_layer=2, n_head=2, d_model=16)
CONFIGS = {
    "gpt2-tied": GPTConfig.gpt2(**SMALL),
    "gpt2-untied": GPTConfig.gpt2(**SMALL, tie_embeddings=False),
    "llama": llama_config(**SMALL, d_ff=24),
    "llama-tied": llama_config(**SMALL, tie_embeddings=True),
    "llama-bias": llama_config(**SMALL, bias=True),
    "gpt1-tied": GPTConfig.gpt1(**SMALL),
    "gpt1-untied-relu": GPTConfig.gpt1(**SMALL, tie_embeddings=False, activation="relu", eps=3e-5),
}


def random_model(config: GPTConfig, dtype=np.float64, seed: int = 0) -> GPT:
    """A model whose every parameter (norm gains and biases included) is random."""
    model = GPT(config, rng=np.random.default_rng(seed), dtype=dtype)
    rng = np.random.default_rng(seed + 1)
    for _, p in model.named_parameters():
        p[...] = rng.normal(1.0 if p.ndim == 1 else 0.0, 0.2, p.shape)
    return model


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_round_trip_is_bitwise(name, dtype, tmp_path):
    model = random_model(CONFIGS[name], dtype)
    save_pretrained(model, tmp_path / "out")
    back = from_pretrained(tmp_path / "out")
    assert back.config == model.config and back.dtype == dtype
    ours, theirs = model.parameters(), back.parameters()
    assert sorted(ours) == sorted(theirs)
    for key in ours:
        assert ours[key].tobytes() == theirs[key].tobytes(), key
    ids = np.random.default_rng(0).integers(0, 40, (2, 12))
    assert np.array_equal(model(ids)[1], back(ids)[1])
    tensors, meta = read_file(tmp_path / "out" / "model.safetensors")
    assert meta == {"format": "pt"} and ("lm_head.weight" in tensors) == (not model.config.tie_embeddings)


@pytest.mark.parametrize("arch", ["gpt2", "llama", "openai-gpt", "xlnet", "bert", "roberta", "albert", "bart",
                                  "t5_v1_0", "t5_v1_1"])
def test_transformers_folder_survives_minipt_bitwise(arch, tmp_path):
    """A folder transformers wrote -> minipt -> folder: the very same tensors and names,
    and the same config where both name a key (every single-folder fixture)."""
    save_pretrained(from_pretrained(FIXTURES / arch), tmp_path / "again")
    original, _ = read_file(FIXTURES / arch / "model.safetensors")
    again, meta = read_file(tmp_path / "again" / "model.safetensors")
    assert meta == {"format": "pt"} and sorted(original) == sorted(again)
    for name in original:
        assert original[name].dtype == again[name].dtype and original[name].tobytes() == again[name].tobytes(), name
    old = json.loads((FIXTURES / arch / "config.json").read_text())
    new = json.loads((tmp_path / "again" / "config.json").read_text())
    shared = set(old) & set(new) - {"transformers_version", "bos_token_id", "eos_token_id"}
    assert {k: old[k] for k in shared} == {k: new[k] for k in shared}


def test_their_named_maps_params_like_grads():
    model = random_model(CONFIGS["llama"])
    theirs = their_named(model)
    c_attn = model.h.blocks[1].attn.c_attn.params["weight"]          # (3C, C): q | k | v
    np.testing.assert_array_equal(theirs["model.layers.1.self_attn.v_proj.weight"], c_attn[32:])
    np.testing.assert_array_equal(theirs["model.layers.1.mlp.up_proj.weight"], model.h.blocks[1].mlp.w3.params["weight"])
    gpt2 = random_model(CONFIGS["gpt2-tied"])
    np.testing.assert_array_equal(their_named(gpt2)["transformer.h.0.mlp.c_fc.weight"],
                                  gpt2.h.blocks[0].mlp.c_fc.params["weight"].T)
    gpt1 = random_model(CONFIGS["gpt1-tied"])
    theirs = their_named(gpt1)
    np.testing.assert_array_equal(theirs["transformer.positions_embed.weight"], gpt1.wpe.params["weight"])
    np.testing.assert_array_equal(theirs["transformer.h.1.attn.c_attn.weight"],
                                  gpt1.h.blocks[1].attn.c_attn.params["weight"].T)       # (C, 3C): q | k | v
    np.testing.assert_array_equal(theirs["transformer.h.1.ln_2.bias"], gpt1.h.blocks[1].ln_2.params["bias"])


def test_overwrite_replaces_and_empty_folder_is_fine(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    save_pretrained(random_model(CONFIGS["gpt2-tied"], seed=1), out)          # an empty folder: fine
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_pretrained(random_model(CONFIGS["gpt2-tied"], seed=2), out)
    save_pretrained(random_model(CONFIGS["llama"], seed=3), out, overwrite=True)
    assert from_pretrained(out).config.norm == "rms"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]              # no temporary folder left


def test_sharded_folder_loads(tmp_path):
    tensors, _ = read_file(FIXTURES / "gpt2" / "model.safetensors")
    names = sorted(tensors)
    folder = tmp_path / "sharded"
    folder.mkdir()
    shutil.copy(FIXTURES / "gpt2" / "config.json", folder)
    shards = {"model-00001-of-00002.safetensors": names[:7], "model-00002-of-00002.safetensors": names[7:]}
    for file, part in shards.items():
        write_tensors(folder / file, {n: tensors[n] for n in part})
    weight_map = {n: f for f, part in shards.items() for n in part}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    a, b = from_pretrained(folder), from_pretrained(FIXTURES / "gpt2")
    assert all(np.array_equal(p, b.parameters()[k]) for k, p in a.parameters().items())


def test_original_gpt2_file_layout_loads(tmp_path):
    """OpenAI's GPT-2 release: names without 'transformer.', causal-mask buffers attn.bias."""
    tensors, _ = read_file(FIXTURES / "gpt2" / "model.safetensors")
    bare = {n[len("transformer."):]: a for n, a in tensors.items()}
    for i in range(2):
        bare[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, 16, 16)))
    folder = tmp_path / "gpt2"
    folder.mkdir()
    shutil.copy(FIXTURES / "gpt2" / "config.json", folder)
    write_tensors(folder / "model.safetensors", bare)
    a, b = from_pretrained(folder), from_pretrained(FIXTURES / "gpt2")
    assert all(np.array_equal(p, b.parameters()[k]) for k, p in a.parameters().items())


def test_older_openai_gpt_file_layout_loads(tmp_path):
    """An OpenAIGPTModel file of older transformers: names without 'transformer.', the causal
    masks attn.bias and position_ids stored as buffers (skipped)."""
    tensors, _ = read_file(FIXTURES / "openai-gpt" / "model.safetensors")
    bare = {n[len("transformer."):]: a for n, a in tensors.items()}
    bare["position_ids"] = np.arange(16)[None]
    for i in range(2):
        bare[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, 16, 16)))
    folder = tmp_path / "openai-gpt"
    folder.mkdir()
    config = json.loads((FIXTURES / "openai-gpt" / "config.json").read_text())
    config.update(n_ctx=16, n_special=0, predict_special_tokens=True)       # keys of the hub's openai-gpt
    (folder / "config.json").write_text(json.dumps(config))
    write_tensors(folder / "model.safetensors", bare)
    a, b = from_pretrained(folder), from_pretrained(FIXTURES / "openai-gpt")
    assert a.config == b.config
    assert all(np.array_equal(p, b.parameters()[k]) for k, p in a.parameters().items())


def test_float16_widens_and_dtype_is_chosen(tmp_path):
    model = random_model(CONFIGS["gpt2-untied"], np.float32)
    save_pretrained(model, tmp_path / "f32")
    assert from_pretrained(tmp_path / "f32").dtype == np.float32
    assert from_pretrained(tmp_path / "f32", dtype=np.float64).dtype == np.float64
    tensors, _ = read_file(tmp_path / "f32" / "model.safetensors")
    (tmp_path / "f16").mkdir()
    shutil.copy(tmp_path / "f32" / "config.json", tmp_path / "f16")
    write_tensors(tmp_path / "f16" / "model.safetensors", {k: v.astype(np.float16) for k, v in tensors.items()})
    half = from_pretrained(tmp_path / "f16")
    assert half.dtype == np.float32
    np.testing.assert_allclose(half.parameters()["wte.weight"], model.parameters()["wte.weight"], rtol=1e-3)


def _run_folder(tmp_path: Path, model: GPT, tokenizer, family: str) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    save_checkpoint(run / "checkpoint.npz", model, config={**model.spec(), "model": family})
    tokenizer.save(run / "tokenizer.json")
    return run


def test_export_char_level_run_and_sample(tmp_path):
    text = "the cat sat on the mat. "
    tok = CharTokenizer().fit(text)
    model = random_model(GPTConfig.gpt2(**{**SMALL, "vocab_size": tok.vocab_size}), np.float32)
    run = _run_folder(tmp_path, model, tok, "gpt")
    out, note = export_checkpoint(run / "checkpoint.npz", tmp_path / "hf")
    assert "minipt_tokenizer.json" in note and (out / "minipt_tokenizer.json").is_file()
    assert (out / "tokenizer.json").is_file() and not (out / "vocab.json").exists()
    loaded, tok2 = load_hf_for_sampling(out)
    prompt = tok2.encode_array("the ")
    greedy = SamplingConfig(max_new_tokens=6, temperature=0)
    rng = np.random.default_rng(0)
    assert np.array_equal(generate(loaded, prompt, greedy, rng), generate(model, prompt, greedy, rng))


def test_export_byte_bpe_llama_run(tmp_path):
    tok = ByteBPETokenizer().fit("你好 world, hello world " * 4, 10)
    model = random_model(llama_config(**{**SMALL, "vocab_size": tok.vocab_size}), np.float32)
    out, note = export_checkpoint(_run_folder(tmp_path, model, tok, "llama"), tmp_path / "hf")
    assert "LlamaForCausalLM" in note and (out / "vocab.json").is_file() and (out / "merges.txt").is_file()
    config = json.loads((out / "config.json").read_text())
    assert config["eos_token_id"] == tok.special_tokens["<|endoftext|>"]
    loaded, tok2 = load_hf_for_sampling(out)
    assert tok2.encode("你好 world<|endoftext|>") == tok.encode("你好 world<|endoftext|>")
    assert not loaded.training


def test_export_gpt1_run(tmp_path):
    """A ``minipt train gpt1`` run exports as OpenAIGPTLMHeadModel; a GPT-1 run
    saved before GPT-1 took the tanh GELU (activation "gelu", exact) is refused, since
    transformers' afn "gelu" would compute the approximation."""
    tok = ByteBPETokenizer().fit("the cat sat on the mat " * 4, 6)
    model = random_model(GPTConfig.gpt1(**{**SMALL, "vocab_size": tok.vocab_size}), np.float32)
    out, note = export_checkpoint(_run_folder(tmp_path, model, tok, "gpt1"), tmp_path / "hf")
    assert note.startswith("OpenAIGPTLMHeadModel with the ByteBPETokenizer as merges.txt, tokenizer_config.json, "
                           "vocab.json")
    config = json.loads((out / "config.json").read_text())
    assert (config["model_type"], config["afn"], config["n_positions"], config["n_ctx"]) == ("openai-gpt", "gelu",
                                                                                               12, 12)
    loaded, tok2 = load_hf_for_sampling(out)
    ids = tok.encode_array("the cat sat")[None]
    assert loaded.config == model.config and np.array_equal(loaded(ids)[1], model(ids)[1])
    assert tok2.encode("the mat") == tok.encode("the mat")

    old = GPT(GPTConfig.gpt1(**{**SMALL, "vocab_size": tok.vocab_size}, activation="gelu"),
              rng=np.random.default_rng(0))
    run = tmp_path / "old"
    run.mkdir()
    save_checkpoint(run / "checkpoint.npz", old, config={**old.spec(), "model": "gpt1"})
    tok.save(run / "tokenizer.json")
    with pytest.raises(ValueError, match=r"activation='gelu': OpenAIGPTLMHeadModel's afn is 'gelu' \(the tanh"):
        export_checkpoint(run, tmp_path / "hf-old")
    assert not (tmp_path / "hf-old").exists()


def test_folder_without_tokenizer_samples_ids(tmp_path):
    save_pretrained(random_model(CONFIGS["llama"]), tmp_path / "m")
    model, tok = load_hf_for_sampling(tmp_path / "m")
    assert tok is None and model.config.vocab_size == 40
