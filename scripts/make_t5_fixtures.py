"""Write tests/interop/fixtures/t5_v1_0/, t5_v1_1/ and t5_reference.safetensors: two tiny
random ``T5ForConditionalGeneration`` models, what transformers computes with them, and
transformers' relative-position bucket ids on a grid of settings, for the default test
suite (no torch) to check minipt's T5 against (tests/interop/test_t5_fixtures.py).

Run by hand with torch 2.13.0 and transformers 5.23.0 (see scripts/make_hf_fixtures.py):

    /work/hfvenv/bin/python scripts/make_t5_fixtures.py

The models: 2 encoder and 3 decoder layers, d_model 16, 2 heads (d_kv 8), d_ff 24, vocab
40, 8 buckets with max_distance 12 (so a 12-token source reaches the log-spaced buckets),
float64, ``dropout_rate`` 0, every parameter random (norm gains 1 + noise).

- ``t5_v1_0/``: ``feed_forward_proj`` "relu", tied head, output rescaled by d_model^-1/2;
- ``t5_v1_1/``: "gated-gelu" (gelu_new) with ``tie_word_embeddings=False``, which
  transformers 5.23 turns into a tied head without the rescale (``scale_decoder_outputs``
  false): that is the model it computes, so that is the fixture.

transformers' ``T5LayerNorm`` computes the mean square in float32 whatever the model's
dtype ("accumulation ... done in fp32"); for a float64 reference the script runs the same
formula in float64 (``_float64_norm``) and records how far that is from transformers' own
(float32 rounding only).

One batch: a source of 2 x 12 tokens, the second row padded after 9 (``attention_mask``),
labels of 2 x 9 with two ignored (-100). ``<variant>/logits``, ``<variant>/loss`` and
``<variant>/grad/<name>`` for every parameter. ``buckets/bidirectional`` and
``buckets/causal`` (settings x 281) hold ``T5Attention._relative_position_bucket`` of the
relative positions -140..140 for each (num_buckets, max_distance) of ``buckets/settings``.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import safetensors
import torch
import transformers
from safetensors.numpy import save_file
from transformers import T5Config, T5ForConditionalGeneration
from transformers.models.t5 import modeling_t5
from transformers.models.t5.modeling_t5 import T5Attention

OUT = Path(__file__).resolve().parent.parent / "tests" / "interop" / "fixtures"
V, C, H, F, L, LD, S, T = 40, 16, 2, 24, 2, 3, 12, 9
REL = np.arange(-140, 141)
_ORIGINAL = modeling_t5.T5LayerNorm.forward


def _float64_norm(on: bool) -> None:
    """T5's RMSNorm x / sqrt(mean(x^2) + eps) * g with the mean square in the input's dtype
    (``on``), or transformers' code as shipped."""
    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))
    modeling_t5.T5LayerNorm.forward = forward if on else _ORIGINAL


def randomize(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Matrices N(0, 0.3^2), norm gains 1 + N(0, 0.1^2), bias tables N(0, 0.5^2), shared N(0, 1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith("layer_norm.weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif "relative_attention_bias" in name:
                p.copy_(0.5 * noise)
            elif name == "shared.weight":
                p.copy_(noise)
            else:
                p.copy_(0.3 * noise)


def bucket_grid() -> dict[str, np.ndarray]:
    settings = [(n, d) for n in list(range(4, 34)) + [64]
                for d in (5, 7, 10, 12, 16, 20, 27, 32, 37, 49, 64, 100, 128) if d >= n // 2 + 1]
    out = {"buckets/settings": np.array(settings, dtype=np.int64)}
    rel = torch.tensor(REL)
    for name, bi in (("bidirectional", True), ("causal", False)):
        out[f"buckets/{name}"] = np.stack([T5Attention._relative_position_bucket(rel, bi, n, d).numpy()
                                           for n, d in settings]).astype(np.int8)
    return out


def main() -> None:
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(2, V, (2, S), generator=gen)
    mask = torch.ones(2, S, dtype=torch.long)
    mask[1, 9:] = 0
    ids[1, 9:] = 0
    labels = torch.randint(2, V, (2, T), generator=gen)
    labels[0, 7:] = -100
    ref = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "labels": labels.numpy()}
    meta_gaps = {}
    for variant, ffn, tie in (("v1_0", "relu", True), ("v1_1", "gated-gelu", False)):
        cfg = T5Config(vocab_size=V, d_model=C, d_kv=C // H, d_ff=F, num_layers=L, num_decoder_layers=LD,
                       num_heads=H, relative_attention_num_buckets=8, relative_attention_max_distance=12,
                       dropout_rate=0.0, layer_norm_epsilon=1e-6, feed_forward_proj=ffn, tie_word_embeddings=tie,
                       pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
        model = T5ForConditionalGeneration(cfg).to(torch.float64).eval()
        assert model.config.scale_decoder_outputs == tie and model.lm_head.weight is model.shared.weight
        randomize(model, gen)
        folder = OUT / f"t5_{variant}"
        shutil.rmtree(folder, ignore_errors=True)
        model.save_pretrained(folder)
        (folder / "generation_config.json").unlink(missing_ok=True)
        with torch.no_grad():
            _float64_norm(False)
            shipped = model(input_ids=ids, attention_mask=mask, labels=labels).logits
            _float64_norm(True)
            patched = model(input_ids=ids, attention_mask=mask, labels=labels).logits
        gap = float((patched - shipped).abs().max() / patched.abs().max())
        print(f"t5 {variant}: float64 mean square vs transformers' float32 one: max relative gap {gap:.1e}")
        assert gap < 1e-5, "the float64 patch changed more than float32 rounding"
        meta_gaps[variant] = f"{gap:.3e}"
        model.zero_grad()
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        ref[f"{variant}/logits"] = out.logits.detach().numpy()
        ref[f"{variant}/loss"] = out.loss.detach().numpy()
        for name, p in model.named_parameters():                  # tied weights appear once
            ref[f"{variant}/grad/{name}"] = p.grad.numpy().copy()
        print(f"t5 {variant}: loss {float(out.loss):.6f}, {sum(p.numel() for p in model.parameters())} parameters")
    _float64_norm(False)
    ref.update(bucket_grid())
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__, "script": "scripts/make_t5_fixtures.py",
            "float64_patch": "T5LayerNorm.forward", **{f"float64_patch_gap_{k}": v for k, v in meta_gaps.items()}}
    save_file({k: np.asarray(v, order="C") for k, v in ref.items()}, str(OUT / "t5_reference.safetensors"),
              metadata=meta)


if __name__ == "__main__":
    main()
