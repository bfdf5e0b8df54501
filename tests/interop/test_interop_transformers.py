"""Optional: transformers loads folders minipt saved and computes the same thing.

Skipped unless torch and transformers are installed; run by hand with

    /work/hfvenv/bin/python -m pytest -q tests/interop/test_interop_transformers.py

(see ``scripts/make_hf_fixtures.py`` for that environment). transformers' LLaMA takes
RMSNorm and the rotary angles in float32 even in a float64 model, so its logits agree
to float32 rounding (1e-5); GPT-2 is float64 throughout (1e-9).
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minipt.inference.decoding import SamplingConfig, generate  # noqa: E402
from minipt.interop import save_pretrained  # noqa: E402
from minipt.models.decoder.gpt import GPT, GPTConfig  # noqa: E402
from minipt.models.decoder.llama import llama_config  # noqa: E402

SMALL = dict(vocab_size=50, block_size=16, n_layer=2, n_head=4, d_model=32)
CASES = {   # name: (config, dtype, architecture, logits tolerance)
    "gpt2-tied": (GPTConfig.gpt2(**SMALL, eps=2e-5), np.float64, "GPT2LMHeadModel", 1e-9),
    "gpt2-untied": (GPTConfig.gpt2(**SMALL, d_ff=48, tie_embeddings=False), np.float64, "GPT2LMHeadModel", 1e-9),
    "gpt2-float32": (GPTConfig.gpt2(**SMALL), np.float32, "GPT2LMHeadModel", 1e-5),
    "llama": (llama_config(**SMALL, d_ff=40), np.float64, "LlamaForCausalLM", 1e-5),
    "llama-tied-bias": (llama_config(**SMALL, tie_embeddings=True, bias=True), np.float64, "LlamaForCausalLM", 1e-5),
}


def random_model(config: GPTConfig, dtype, seed: int = 0) -> GPT:
    model = GPT(config, rng=np.random.default_rng(seed), dtype=dtype)
    rng = np.random.default_rng(seed + 1)
    for _, p in model.named_parameters():                   # norm gains ~ 1, biases and matrices random
        p[...] = rng.normal(1.0 if p.ndim == 1 else 0.0, 0.3, p.shape)
    return model


@pytest.mark.parametrize("name", list(CASES))
def test_transformers_loads_minipt_folder(name, tmp_path):
    config, dtype, arch, tol = CASES[name]
    model = random_model(config, dtype)
    save_pretrained(model, tmp_path / "m")
    hf, info = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "m", attn_implementation="sdpa",
                                                                 output_loading_info=True)
    hf.eval()
    assert type(hf).__name__ == arch
    assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert next(hf.parameters()).dtype == (torch.float64 if dtype == np.float64 else torch.float32)

    ids = np.random.default_rng(2).integers(0, config.vocab_size, (2, config.block_size))
    with torch.no_grad():
        theirs = hf(input_ids=torch.from_numpy(ids)).logits.numpy()
    _, ours = model(ids)
    assert np.abs(ours - theirs).max() / np.abs(theirs).max() <= tol

    prompt = ids[0, :4]
    with torch.no_grad():
        out = hf.generate(torch.from_numpy(prompt[None]), max_new_tokens=10, do_sample=False,
                          pad_token_id=0)[0, 4:].numpy()
    mine = generate(model, prompt, SamplingConfig(max_new_tokens=10, temperature=0), np.random.default_rng(0))
    assert out.tolist() == mine.tolist()
