"""minipt's XLNet <-> transformers' ``XLNetLMHeadModel`` (Yang et al. 2019, ``xlnet``).

Tensor names (layer i; minipt name on the right; every entry a plain copy):

    transformer.word_embedding.weight             (V, C)      word_embedding.weight (also the tied head)
    transformer.mask_emb                          (1, 1, C)   mask_emb: the query stream's w
    transformer.layer.i.rel_attn.{q,k,v,o,r}      (C, H, D)   layer.i.rel_attn.{q,k,v,o,r}
    transformer.layer.i.rel_attn.r_{w,r,s}_bias   (H, D)      layer.i.rel_attn.r_{w,r,s}_bias
    transformer.layer.i.rel_attn.seg_embed        (2, H, D)   layer.i.rel_attn.seg_embed
    transformer.layer.i.rel_attn.layer_norm.*     (C,)        layer.i.rel_attn.layer_norm.*
    transformer.layer.i.ff.layer_1.weight / .bias (F, C)      layer.i.ff.layer_1.weight / .bias
    transformer.layer.i.ff.layer_2.weight / .bias (C, F)      layer.i.ff.layer_2.weight / .bias
    transformer.layer.i.ff.layer_norm.*           (C,)        layer.i.ff.layer_norm.*
    lm_loss.bias                                  (V,)        lm_loss.bias
    lm_loss.weight                                (V, C)      lm_loss.weight: only when untied

- **Same storage.** minipt keeps XLNet's (C, H, D) projection tensors and computes
  x W as transformers' einsum "ibh,hnd->ibnd" does, so nothing is transposed.
- **What is covered** (``config_from_hf`` refuses the rest by name): ``attn_type`` "bi",
  ``bi_data`` false, ``clamp_len`` <= 0 (no clamping), ``same_length`` false; ``mem_len``
  and ``reuse_len`` are read and not used: minipt has no memory (the tests pass
  ``use_mems=False``, ``mems`` None). ``ff_activation`` "gelu" (exact) or "gelu_new"
  (tanh); ``layer_norm_eps`` -> ``eps``; ``d_head`` must be d_model / n_head.
  ``dropout`` is read and not used (minipt's XLNet trains without dropout; evaluation
  is the same). The summary, start/end and SQuAD options belong to other heads and are
  ignored. Segments: ``token_type_ids`` of any number of segments, compared pairwise.
- **Tied head.** ``lm_loss.weight`` is ``word_embedding.weight`` (``tie_word_embeddings``,
  the default); a file of a tied model holds no ``lm_loss.weight``.
"""
from __future__ import annotations

from ..models.unified.xlnet import XLNet, XLNetConfig
from .hf_config import check_architectures, expect, get_bool, get_float, get_int
from .layout import Entry

MODEL_TYPE = "xlnet"
ARCHITECTURE = "XLNetLMHeadModel"
ACCEPTED = (ARCHITECTURE, "XLNetModel")
PREFIX = "transformer."
CONFIG = XLNetConfig
ACTIVATION = {"gelu": "gelu", "gelu_new": "gelu_tanh"}          # transformers' ff_activation -> minipt's


def entries(config: XLNetConfig) -> list[Entry]:
    """The name table for an XLNet ``config`` (see the module docstring)."""
    table = [Entry("transformer.word_embedding.weight", "word_embedding.weight"),
             Entry("transformer.mask_emb", "mask_emb")]
    for i in range(config.n_layer):
        hf, mp = f"transformer.layer.{i}.", f"layer.{i}."
        names = [f"rel_attn.{w}" for w in ("q", "k", "v", "o", "r", "r_r_bias", "r_s_bias", "r_w_bias", "seg_embed")]
        names += [f"{m}.{p}" for m in ("rel_attn.layer_norm", "ff.layer_norm", "ff.layer_1", "ff.layer_2")
                  for p in ("weight", "bias")]
        table += [Entry(hf + n, mp + n) for n in names]
    table.append(Entry("lm_loss.bias", "lm_loss.bias"))
    if not config.tie_embeddings:
        table.append(Entry("lm_loss.weight", "lm_loss.weight"))
    return table


def build(config: XLNetConfig, rng, dtype) -> XLNet:
    return XLNet(config, rng=rng, dtype=dtype)


def is_buffer(name: str) -> bool:
    return False                                                  # XLNet stores no buffers


def export_problem(config) -> str | None:
    if not isinstance(config, XLNetConfig):
        return f"{type(config).__name__}: XLNetLMHeadModel holds minipt's XLNet only"
    return None


def config_from_hf(hf: dict) -> XLNetConfig:
    """An ``XLNetConfig`` dictionary -> minipt's ``XLNetConfig``; unsupported options raise."""
    check_architectures(hf, ACCEPTED)
    expect(hf, "attn_type", ("bi",), "bi", "minipt's XLNet has bidirectional relative encodings only")
    expect(hf, "bi_data", (False,), False, "minipt does not split batches into forward and backward orders")
    expect(hf, "same_length", (False,), False, "it changes the causal mask of 'uni' attention, not covered")
    clamp = hf.get("clamp_len", -1)
    if not isinstance(clamp, int) or clamp > 0:
        raise ValueError(f"config.json: clamp_len = {clamp!r} is not supported: minipt does not clamp distances")
    act = expect(hf, "ff_activation", tuple(ACTIVATION), "gelu", "minipt's XLNet has exact and tanh GELU")
    C, H = get_int(hf, "d_model", 1024), get_int(hf, "n_head", 16)
    if hf.get("d_head") not in (None, C // H) or C % H:
        raise ValueError(f"config.json: d_head = {hf.get('d_head')!r} with d_model {C} and n_head {H}: minipt "
                         "needs d_head = d_model / n_head")
    get_float(hf, "dropout", 0.1)
    return XLNetConfig(vocab_size=get_int(hf, "vocab_size", 32000), n_layer=get_int(hf, "n_layer", 24), n_head=H,
                       d_model=C, d_inner=get_int(hf, "d_inner", 4096), activation=ACTIVATION[act],
                       eps=get_float(hf, "layer_norm_eps", 1e-12),
                       tie_embeddings=get_bool(hf, "tie_word_embeddings", True))


def config_to_hf(c: XLNetConfig, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    """minipt's ``XLNetConfig`` -> the ``config.json`` that ``XLNetLMHeadModel`` reads."""
    return {
        "architectures": [ARCHITECTURE], "model_type": MODEL_TYPE, "vocab_size": c.vocab_size,
        "d_model": c.d_model, "n_layer": c.n_layer, "n_head": c.n_head, "d_head": c.d_model // c.n_head,
        "d_inner": c.d_inner, "ff_activation": {v: k for k, v in ACTIVATION.items()}[c.activation],
        "attn_type": "bi", "bi_data": False, "clamp_len": -1, "same_length": False, "mem_len": None,
        "reuse_len": None, "layer_norm_eps": c.eps, "dropout": 0.0, "initializer_range": 0.02,
        "tie_word_embeddings": c.tie_embeddings, "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": None,
        "dtype": dtype, "torch_dtype": dtype,
    }
