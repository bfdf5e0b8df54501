"""Write tests/interop/fixtures/: tiny random transformers models and their numbers.

The fixtures are the *independent reference* for ``minipt.interop``: transformers and
PyTorch compute the logits, the loss and every parameter's gradient, and the default
test suite (no torch) checks minipt's forward and hand-written backward against them.

Run by hand, where torch and transformers are installed (not needed by minipt itself):

    python3 -m venv /work/hfvenv
    /work/hfvenv/bin/pip install torch==2.13.0 transformers==5.23.0 safetensors numpy
    /work/hfvenv/bin/python scripts/make_hf_fixtures.py

It writes, for GPT-2 (``GPT2LMHeadModel``, tied head), LLaMA (``LlamaForCausalLM``) and
GPT-1 (``OpenAIGPTLMHeadModel``, ``openai-gpt``: post-LN, tanh GELU, tied head):

- ``<arch>/``: the folder ``model.save_pretrained`` writes (config.json, model.safetensors;
  transformers 5 always writes safetensors): 2 layers, d 32, 4 heads, vocab 64, context
  16, float64, every parameter random (norm gains 1 + noise, non-zero biases) so that
  every point of the name mapping matters, and non-default epsilons (GPT-1: d 32 with
  its fixed MLP width 4C = 128, written as ``openai-gpt/``);
- ``<arch>_reference.safetensors``: ``input_ids`` (2, 16), ``targets`` (2, 16),
  ``logits`` (2, 16, 64), ``loss`` () = mean cross-entropy, and ``grad/<name>`` for every
  parameter under transformers' names; the metadata records the versions.

And a tokenizer: a byte-level BPE trained by the ``tokenizers`` library (not by minipt),
wrapped in transformers' ``GPT2Tokenizer`` and saved by it (``tokenizer/``, holding
``tokenizer.json``, plus ``vocab.json`` + ``merges.txt`` from the BPE model), with the ids
transformers gives a few texts (``tokenizer_reference.json``).

float64 all the way: transformers' LLaMA computes RMSNorm and the rotary angles in
float32 whatever the model's dtype (a choice for bfloat16 training), and its eager
attention takes the softmax in float32. For a float64 reference this script runs those
two functions' formulas in float64 (``_float64_llama``) and uses PyTorch's SDPA attention;
it records how far the patched model is from the unpatched one (float32 rounding only).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import safetensors
import tokenizers
import torch
import transformers
from safetensors.numpy import save_file
from tokenizers import decoders, models, pre_tokenizers, trainers
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    GPT2Tokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    OpenAIGPTConfig,
    OpenAIGPTLMHeadModel,
)
from transformers.models.llama import modeling_llama

OUT = Path(__file__).resolve().parent.parent / "tests" / "interop" / "fixtures"
V, T, C, L, H, B = 64, 16, 32, 2, 4, 2
TEXTS = ["hello world", "The quick brown fox jumps over the lazy dog.", "你好，世界！你好世界",
         "it's 2024 and we've got 3 cats", "  two  spaces\nand\ttabs\n\n", "émigré café naïve",
         "emoji 🙂🚀 and <|endoftext|> end", "Здравствуй мир", ""]


def randomize(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Every parameter random: matrices N(0, 0.2^2), 1-D tensors (norm gains ~ 1, biases ~ 0) with noise."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if p.ndim == 1:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * noise)
            else:
                p.copy_(0.2 * noise)


def _float64_llama(on: bool) -> None:
    """Run LlamaRMSNorm and the rotary angles in the input's dtype (float64) instead of float32."""
    if not on:
        modeling_llama.LlamaRMSNorm.forward = _ORIGINAL[0]
        modeling_llama.LlamaRotaryEmbedding.forward = _ORIGINAL[1]
        return

    def rms_norm(self, x):                                   # g * x / sqrt(mean(x^2) + eps)
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    def rotary(self, x, position_ids):                        # angles t * theta^(-2i/D), halves repeated
        theta = self.config.rope_parameters["rope_theta"]
        D = self.config.hidden_size // self.config.num_attention_heads
        inv_freq = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
        freqs = position_ids[..., None].to(torch.float64) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    modeling_llama.LlamaRMSNorm.forward = rms_norm
    modeling_llama.LlamaRotaryEmbedding.forward = rotary


_ORIGINAL = (modeling_llama.LlamaRMSNorm.forward, modeling_llama.LlamaRotaryEmbedding.forward)


def reference(model, ids: torch.Tensor, targets: torch.Tensor) -> dict[str, np.ndarray]:
    model.zero_grad()
    logits = model(input_ids=ids).logits                       # (B, T, V)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    loss.backward()
    out = {"input_ids": ids.numpy(), "targets": targets.numpy(), "logits": logits.detach().numpy(),
           "loss": loss.detach().numpy()}
    for name, p in model.named_parameters():                    # tied weights appear once
        out[f"grad/{name}"] = p.grad.numpy().copy()
    return out


def write(name: str, model, gen: torch.Generator, extra_meta: dict[str, str]) -> None:
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    assert (folder / "model.safetensors").is_file(), "transformers did not write model.safetensors"
    (folder / "generation_config.json").unlink(missing_ok=True)     # not part of the model
    ids = torch.randint(0, V, (B, T + 1), generator=gen)
    ref = reference(model, ids[:, :T], ids[:, 1:])
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__,
            "script": "scripts/make_hf_fixtures.py", **extra_meta}
    save_file({k: np.asarray(v, order="C") for k, v in ref.items()}, str(OUT / f"{name}_reference.safetensors"),
              metadata=meta)
    print(f"{name}: loss {float(ref['loss']):.6f}, {sum(p.numel() for p in model.parameters())} parameters")


def gpt2(gen: torch.Generator) -> None:
    cfg = GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H, n_inner=2 * C,
                     activation_function="gelu_new", layer_norm_epsilon=3e-5, attn_pdrop=0.0, resid_pdrop=0.0,
                     embd_pdrop=0.0, tie_word_embeddings=True, bos_token_id=None, eos_token_id=None)
    cfg._attn_implementation = "eager"                          # float64 throughout in GPT-2's eager path
    model = GPT2LMHeadModel(cfg).to(torch.float64).eval()
    randomize(model, gen)
    write("gpt2", model, gen, {"attention": "eager"})


def llama(gen: torch.Generator) -> None:
    cfg = LlamaConfig(vocab_size=V, max_position_embeddings=T, hidden_size=C, intermediate_size=48,
                      num_hidden_layers=L, num_attention_heads=H, num_key_value_heads=H, rms_norm_eps=4e-6,
                      tie_word_embeddings=False, bos_token_id=None, eos_token_id=None)
    cfg._attn_implementation = "sdpa"                           # eager takes the softmax in float32
    model = LlamaForCausalLM(cfg).to(torch.float64).eval()
    randomize(model, gen)
    probe = torch.randint(0, V, (B, T), generator=gen)
    with torch.no_grad():
        as_shipped = model(input_ids=probe).logits
        _float64_llama(True)
        patched = model(input_ids=probe).logits
    gap = float((patched - as_shipped).abs().max() / patched.abs().max())
    print(f"llama: float64 RMSNorm/rotary vs transformers' float32 ones: max relative gap {gap:.1e}")
    assert gap < 1e-5, "the float64 patch changed more than float32 rounding"
    write("llama", model, gen, {"attention": "sdpa", "float64_patch": "LlamaRMSNorm, LlamaRotaryEmbedding",
                                "float64_patch_gap": f"{gap:.3e}"})
    _float64_llama(False)


def openai_gpt(gen: torch.Generator) -> None:
    """GPT-1 as transformers has it: post-LN blocks, afn "gelu" (= tanh GELU), learned
    positions ``positions_embed``, tied head, no final LayerNorm; eager float64 attention."""
    cfg = OpenAIGPTConfig(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H, afn="gelu",
                          layer_norm_epsilon=2e-5, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
                          tie_word_embeddings=True)
    model = OpenAIGPTLMHeadModel(cfg).to(torch.float64).eval()
    assert model.lm_head.weight is model.transformer.tokens_embed.weight, "the head is not tied"
    randomize(model, gen)
    write("openai-gpt", model, gen, {"attention": "eager"})


def tokenizer() -> None:
    """A byte-level BPE trained by the tokenizers library, saved through transformers."""
    folder = OUT / "tokenizer"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    bpe = tokenizers.Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + 120 + 1, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    corpus = [" ".join(TEXTS)] * 3 + ["the cat sat on the mat; the dog sat on the log. 你好 世界 " * 5]
    bpe.train_from_iterator(corpus, trainer)
    bpe.model.save(str(folder))                                  # vocab.json + merges.txt
    hf = GPT2Tokenizer.from_pretrained(folder)                   # reads vocab.json + merges.txt
    assert len(hf) == bpe.get_vocab_size(), (len(hf), bpe.get_vocab_size())
    hf.save_pretrained(folder)                                   # tokenizer.json, tokenizer_config.json
    ids = [hf(t)["input_ids"] for t in TEXTS]
    (OUT / "tokenizer_reference.json").write_text(json.dumps(
        {"texts": TEXTS, "ids": ids, "tokenizers": tokenizers.__version__,
         "transformers": transformers.__version__}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"tokenizer: {len(hf)} tokens, {len(TEXTS)} reference texts")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(0)
    gpt2(gen)
    llama(gen)
    openai_gpt(gen)                                             # after the others: their fixtures stay as they were
    tokenizer()
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
