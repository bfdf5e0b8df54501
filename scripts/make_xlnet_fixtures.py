"""Write tests/interop/fixtures/xlnet/ and xlnet_reference.safetensors: a tiny random
``XLNetLMHeadModel`` and what transformers computes with it, for the default test suite
(no torch) to check minipt's XLNet against (tests/interop/test_xlnet_fixtures.py).

Run by hand with torch 2.13.0 and transformers 5.23.0 (see scripts/make_hf_fixtures.py):

    /work/hfvenv/bin/python scripts/make_xlnet_fixtures.py

The model: 2 layers, d_model 16, 2 heads, d_inner 24, vocab 40, float64, exact GELU
(``ff_activation="gelu"``), ``layer_norm_eps`` 1e-6, ``attn_type="bi"``, ``mem_len`` None,
no dropout, tied ``lm_loss``; every parameter random (norm gains 1 + noise, biases and
r_*_bias non-zero). A batch of 2 sequences of 12 tokens, each with its own factorisation
order z: ``perm_mask[b, i, j] = 1`` (i may not see j) when rank[j] >= rank[i], and
``target_mapping`` picks the last 4 positions of z (in the order of z). The labels are
the tokens at those positions. Two runs with the same weights and batch:

- ``one_segment/``: no ``token_type_ids`` (no segment term);
- ``two_segments/``: ``token_type_ids`` with two segments per row (XLNet's relative
  segment encoding: r_s_bias and seg_embed get gradients).

Each holds ``input_ids``, ``order``, ``perm_mask``, ``target_mapping``, ``labels``,
``logits`` (2, 4, 40), ``loss`` and ``grad/<name>`` for every parameter that received a
gradient. transformers builds the relative sinusoids in float32 whatever the model's
dtype, and its two-stream branch then fails on a float64 model ("expected scalar type
Double but found Float"); for a float64 reference the script computes the same formula in
float64 (``_float64_positions``) and records how far that is from transformers' own
float32 sinusoids cast to float64 (float32 rounding only).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import safetensors
import torch
import transformers
from safetensors.numpy import save_file
from transformers import XLNetConfig, XLNetLMHeadModel
from transformers.models.xlnet import modeling_xlnet

OUT = Path(__file__).resolve().parent.parent / "tests" / "interop" / "fixtures"
V, T, C, L, H, F, B, M = 40, 12, 16, 2, 2, 24, 2, 4
_ORIGINAL = modeling_xlnet.XLNetModel.relative_positional_encoding


def _float64_positions(how: str | None) -> None:
    """XLNet's "bi" relative sinusoids (distances klen .. -qlen+1; sines, then cosines) in
    float64 (``how="float64"``), transformers' float32 ones cast to float64 (``"cast"``), or
    transformers' code as shipped (None)."""
    if how is None:
        modeling_xlnet.XLNetModel.relative_positional_encoding = _ORIGINAL
        return
    if how == "cast":
        modeling_xlnet.XLNetModel.relative_positional_encoding = \
            lambda self, *a, **kw: _ORIGINAL(self, *a, **kw).to(torch.float64)
        return

    def encoding(self, qlen, klen, bsz=None, device=None):
        assert self.attn_type == "bi" and not self.bi_data and self.clamp_len <= 0
        inv_freq = 1.0 / 10000.0 ** (torch.arange(0, self.d_model, 2, dtype=torch.float64) / self.d_model)
        pos = torch.arange(klen, -qlen, -1, dtype=torch.float64)
        ang = pos[:, None] * inv_freq
        emb = torch.cat([torch.sin(ang), torch.cos(ang)], dim=-1)[:, None, :]
        return emb.expand(-1, bsz, -1) if bsz is not None else emb

    modeling_xlnet.XLNetModel.relative_positional_encoding = encoding


def randomize(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Every parameter random: matrices N(0, 0.2^2), norm gains 1 + N(0, 0.1^2), the rest N(0, 0.1^2)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith("layer_norm.weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif p.ndim == 1 or name.endswith(("_bias", "mask_emb")):
                p.copy_(0.1 * noise)
            else:
                p.copy_(0.2 * noise)


def batch(gen: torch.Generator) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, V, (B, T), generator=gen)
    order = torch.stack([torch.randperm(T, generator=gen) for _ in range(B)])      # z per row
    rank = torch.argsort(order, dim=1)                                             # rank[b, i]
    perm_mask = (rank[:, None, :] >= rank[:, :, None]).to(torch.float64)            # 1: i may not see j
    target_mapping = torch.zeros(B, M, T, dtype=torch.float64)
    for b in range(B):
        for m, pos in enumerate(order[b, T - M:]):
            target_mapping[b, m, pos] = 1.0
    labels = torch.stack([ids[b, order[b, T - M:]] for b in range(B)])
    token_type_ids = torch.tensor([[0] * 5 + [1] * 7, [0] * 8 + [1] * 4])
    return dict(input_ids=ids, order=order, perm_mask=perm_mask, target_mapping=target_mapping, labels=labels,
                token_type_ids=token_type_ids)


def reference(model, inputs: dict, segments: bool, prefix: str) -> dict[str, np.ndarray]:
    model.zero_grad()
    out = model(input_ids=inputs["input_ids"], perm_mask=inputs["perm_mask"],
                target_mapping=inputs["target_mapping"], labels=inputs["labels"], use_mems=False,
                token_type_ids=inputs["token_type_ids"] if segments else None)
    out.loss.backward()
    ref = {f"{prefix}logits": out.logits.detach().numpy(), f"{prefix}loss": out.loss.detach().numpy()}
    for name, p in model.named_parameters():                    # tied weights appear once
        if p.grad is not None:
            ref[f"{prefix}grad/{name}"] = p.grad.numpy().copy()
    return ref


def main() -> None:
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(0)
    cfg = XLNetConfig(vocab_size=V, d_model=C, n_layer=L, n_head=H, d_inner=F, ff_activation="gelu",
                      attn_type="bi", layer_norm_eps=1e-6, dropout=0.0, mem_len=None, reuse_len=None,
                      bi_data=False, clamp_len=-1, same_length=False, tie_word_embeddings=True,
                      pad_token_id=None, bos_token_id=None, eos_token_id=None)
    model = XLNetLMHeadModel(cfg).to(torch.float64).eval()
    assert model.lm_loss.weight is model.transformer.word_embedding.weight, "the head is not tied"
    randomize(model, gen)
    inputs = batch(gen)
    folder = OUT / "xlnet"
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    (folder / "generation_config.json").unlink(missing_ok=True)
    with torch.no_grad():
        kw = dict(perm_mask=inputs["perm_mask"], target_mapping=inputs["target_mapping"], use_mems=False)
        _float64_positions("cast")
        shipped = model(input_ids=inputs["input_ids"], **kw).logits
        _float64_positions("float64")
        patched = model(input_ids=inputs["input_ids"], **kw).logits
    gap = float((patched - shipped).abs().max() / patched.abs().max())
    print(f"xlnet: float64 relative sinusoids vs transformers' float32 ones (cast): max relative gap {gap:.1e}")
    assert gap < 1e-5, "the float64 patch changed more than float32 rounding"
    ref = {k: v.numpy() for k, v in inputs.items()}
    ref.update(reference(model, inputs, False, "one_segment/"))
    ref.update(reference(model, inputs, True, "two_segments/"))
    _float64_positions(None)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__,
            "script": "scripts/make_xlnet_fixtures.py", "float64_patch": "XLNetModel.relative_positional_encoding",
            "float64_patch_gap": f"{gap:.3e}"}
    save_file({k: np.asarray(v, order="C") for k, v in ref.items()}, str(OUT / "xlnet_reference.safetensors"),
              metadata=meta)
    print(f"xlnet: loss {float(ref['one_segment/loss']):.6f} (one segment), "
          f"{float(ref['two_segments/loss']):.6f} (two), {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()
