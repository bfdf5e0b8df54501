"""Optional: transformers loads folders minipt saved and computes the same thing.

Skipped unless torch and transformers are installed; run by hand with

    /work/hfvenv/bin/python -m pytest -q tests/interop/test_interop_transformers.py

(see ``scripts/make_hf_fixtures.py`` for that environment). transformers' LLaMA takes
RMSNorm and the rotary angles in float32 even in a float64 model, so its logits agree
to float32 rounding (1e-5); GPT-2 is float64 throughout (1e-9). GPT-1 (OpenAIGPT, eager
attention only, float64 throughout) agrees to 1e-12, gradients included.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minipt.inference.decoding import SamplingConfig, generate  # noqa: E402
from minipt.interop import save_pretrained, their_named  # noqa: E402
from minipt.models.decoder.gpt import GPT, GPTConfig  # noqa: E402
from minipt.models.decoder.llama import llama_config  # noqa: E402
from minipt.tokenizers import ByteBPETokenizer  # noqa: E402

SMALL = dict(vocab_size=50, block_size=16, n_layer=2, n_head=4, d_model=32)
CASES = {   # name: (config, dtype, architecture, logits tolerance)
    "gpt2-tied": (GPTConfig.gpt2(**SMALL, eps=2e-5), np.float64, "GPT2LMHeadModel", 1e-9),
    "gpt2-untied": (GPTConfig.gpt2(**SMALL, d_ff=48, tie_embeddings=False), np.float64, "GPT2LMHeadModel", 1e-9),
    "gpt2-float32": (GPTConfig.gpt2(**SMALL), np.float32, "GPT2LMHeadModel", 1e-5),
    "llama": (llama_config(**SMALL, d_ff=40), np.float64, "LlamaForCausalLM", 1e-5),
    "llama-tied-bias": (llama_config(**SMALL, tie_embeddings=True, bias=True), np.float64, "LlamaForCausalLM", 1e-5),
    "gpt1-tied": (GPTConfig.gpt1(**SMALL, eps=2e-5), np.float64, "OpenAIGPTLMHeadModel", 1e-12),
    "gpt1-untied-relu": (GPTConfig.gpt1(**SMALL, tie_embeddings=False, activation="relu"), np.float64,
                         "OpenAIGPTLMHeadModel", 1e-12),
    "gpt1-float32": (GPTConfig.gpt1(**SMALL), np.float32, "OpenAIGPTLMHeadModel", 1e-5),
}
ATTENTION = {"OpenAIGPTLMHeadModel": "eager"}                  # transformers has no SDPA path for it


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
    hf, info = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "m", attn_implementation=ATTENTION.get(arch, "sdpa"), output_loading_info=True)
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


@pytest.mark.parametrize("name", ["gpt1-tied", "gpt1-untied-relu"])
def test_gpt1_gradients_match_pytorch(name, tmp_path):
    """transformers' OpenAIGPT, loaded from minipt's folder, backpropagates to the same
    gradient of every parameter (under its names) as minipt's hand-written backward."""
    config, dtype, _, tol = CASES[name]
    model = random_model(config, dtype)
    save_pretrained(model, tmp_path / "m")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    ids = np.random.default_rng(3).integers(0, config.vocab_size, (2, config.block_size + 1))
    logits = hf(input_ids=torch.from_numpy(ids[:, :-1])).logits
    torch.nn.functional.cross_entropy(logits.reshape(-1, config.vocab_size),
                                      torch.from_numpy(ids[:, 1:]).reshape(-1)).backward()
    model.zero_grad()
    model(ids[:, :-1], ids[:, 1:])
    model.backward()
    ours = their_named(model, "grads")
    theirs = {n: p.grad.numpy() for n, p in hf.named_parameters()}     # a tied head appears once
    assert sorted(ours) == sorted(theirs)
    for n, g in theirs.items():
        assert np.abs(ours[n] - g).max() <= tol * np.abs(g).max(), n


def test_gpt1_folder_with_byte_bpe_tokenizer(tmp_path):
    """A GPT-1 exported with a byte-level BPE: AutoTokenizer reads GPT-2's files (the
    tokenizer_config names GPT2Tokenizer), not OpenAI GPT's own BPE format."""
    tok = ByteBPETokenizer().fit("the cat sat on the mat, 你好 " * 4, 8)
    save_pretrained(random_model(GPTConfig.gpt1(**{**SMALL, "vocab_size": tok.vocab_size}), np.float32),
                    tmp_path / "m", tokenizer=tok)
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "m")
    text = "the mat sat, 你好 cat"
    assert hf_tok(text)["input_ids"] == tok.encode(text)


def test_gpt1_is_openai_gpt_config_defaults():
    """transformers' own OpenAIGPTConfig defaults read as GPTConfig.gpt1 with only sizes set."""
    from minipt.interop import openai_gpt_layout
    hf = transformers.OpenAIGPTConfig().to_dict()
    assert openai_gpt_layout.config_from_hf(hf) == GPTConfig.gpt1(vocab_size=40478, block_size=512, n_layer=12,
                                                                  n_head=12, d_model=768, dropout=0.1)
