"""minipt's Transformer (Vaswani et al. 2017) <-> transformers' ``MarianMTModel`` (``marian``).

Marian (Junczys-Dowmunt et al. 2018) is the paper's network as Hugging Face ships it:
post-LN encoder and decoder layers (BART's code and names, ``bart_layout.layer_entries``),
token vectors times sqrt(d_model) (``scale_embedding``), one vocabulary shared by source,
target and output layer, fixed sinusoidal positions from 0 and no embedding LayerNorm.

    model.shared.weight                       (V, C)  shared.weight (also encoder, decoder and lm_head)
    model.{encoder,decoder}.layers.i.*        as BART's: encoder.blocks.i.* / decoder.blocks.i.*

- **The sinusoid's channel order.** Vaswani et al. interleave PE[t, 2i] = sin, PE[t, 2i+1]
  = cos; Marian puts every sine first and every cosine after (``create_weight``), with the
  same frequencies. Renumbering the channels of the residual stream is a change of basis
  that LayerNorm, residual sums and the linear maps carry through unchanged, so the export
  reorders every tensor that reads the stream (input columns: the embedding, q, k, v, the
  cross-attention's q, k, v, the FFN's first layer) or writes it (output rows and biases of
  the attention and FFN outputs, LayerNorm gains and biases) by ``layout.deinterleave``
  (``perm`` "in" / "out"); Marian's own table is then minipt's, reordered alike. Logits
  agree to float rounding.
- **Not stored.** transformers recomputes the position tables (not saved) and starts
  ``final_logits_bias`` (minipt has no output bias) at zeros; a folder holding a
  ``final_logits_bias`` is refused by name (minipt cannot say it is zero without reading it).
- **Covered** (``export_problem``, ``config_from_hf``): post-LN (``prenorm`` False), shared
  embeddings, LayerNorm eps 1e-5 (nn.LayerNorm's, no config key), activation
  relu / gelu / gelu_new. ``decoder_start_token_id`` is written as the tokenizer's ``<s>``
  (what minipt's text-to-text recipe starts the decoder with), else the pad id;
  ``max_position_embeddings`` is the longer of ``max_source_len`` and ``max_target_len``.
"""
from __future__ import annotations

from ..models.seq2seq.transformer import Transformer, TransformerConfig
from .bart_layout import ACTIVATION, EPS, layer_entries
from .hf_config import check_architectures, expect, get_float, get_int
from .layout import Entry

MODEL_TYPE = "marian"
ARCHITECTURE = "MarianMTModel"
ACCEPTED = (ARCHITECTURE,)
PREFIX = "model."
CONFIG = TransformerConfig
_READS = ("attn.c_attn.weight", "mlp.c_fc.weight", "cross_attn.q_proj.weight", "cross_attn.kv_proj.weight")
_WRITES = ("attn.c_proj.weight", "attn.c_proj.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
           "cross_attn.c_proj.weight", "cross_attn.c_proj.bias")


def _perm(ours: str) -> str:
    """Which axis of parameter ``ours`` is the residual stream: "in", "out" or ""."""
    if ours.endswith(_READS):
        return "in"
    if ours.endswith(_WRITES) or ".ln_" in ours:
        return "out"
    return ""


def entries(config: TransformerConfig) -> list[Entry]:
    """The name table (see the module docstring): BART's layer names, channels reordered."""
    table = [Entry("model.shared.weight", "shared.weight", perm="in")]
    for e in layer_entries(config.n_encoder_layers, config.n_decoder_layers):
        table.append(Entry(e.theirs, e.ours, e.how, e.part, e.parts, _perm(e.ours)))
    return table


def tied_copies(config: TransformerConfig) -> dict[str, str]:
    """Tensors a file may store that only repeat ``model.shared``: name -> the one it copies."""
    return {n: "model.shared.weight" for n in
            ("lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")}


def build(config: TransformerConfig, rng, dtype) -> Transformer:
    return Transformer(config, rng=rng, dtype=dtype)


def is_buffer(name: str) -> bool:
    return name.endswith("embed_positions.weight")      # fixed sinusoids, recomputed by both libraries


def export_problem(config) -> str | None:
    if not isinstance(config, TransformerConfig):
        return f"{type(config).__name__}: {ARCHITECTURE} holds minipt's Transformer only"
    for bad, why in ((config.prenorm, "prenorm=True: MarianMTModel's layers are post-LN"),
                     (not config.share_embeddings, "share_embeddings=False: minipt writes Marian's shared vocabulary "
                                                   "only"),
                     (config.eps != EPS, f"eps={config.eps}: {ARCHITECTURE}'s LayerNorms use eps {EPS} (no config "
                                         "key)"),
                     (config.activation not in ACTIVATION.values(), f"activation={config.activation!r}: "
                                                                    f"{ARCHITECTURE} has gelu, gelu_new and relu")):
        if bad:
            return why
    return None


def config_from_hf(hf: dict) -> TransformerConfig:
    """A ``MarianConfig`` dictionary -> minipt's ``TransformerConfig``; unsupported options raise."""
    check_architectures(hf, ACCEPTED)
    expect(hf, "scale_embedding", (True,), False, "minipt's Transformer scales token vectors by sqrt(d_model)")
    expect(hf, "share_encoder_decoder_embeddings", (True,), True, "minipt reads Marian's shared vocabulary only")
    expect(hf, "tie_word_embeddings", (True,), True, "minipt's output layer is the shared embedding")
    act = expect(hf, "activation_function", tuple(ACTIVATION), "gelu", "minipt's Transformer has gelu, gelu_new, relu")
    V = get_int(hf, "vocab_size", 58101)
    if hf.get("decoder_vocab_size") not in (None, V):
        raise ValueError(f"config.json: decoder_vocab_size = {hf['decoder_vocab_size']!r} differs from vocab_size {V}: "
                         "minipt reads Marian's shared vocabulary only")
    for enc, dec, default in (("encoder_attention_heads", "decoder_attention_heads", 16),
                              ("encoder_ffn_dim", "decoder_ffn_dim", 4096)):
        if get_int(hf, enc, default) != get_int(hf, dec, default):
            raise ValueError(f"config.json: {enc} = {hf.get(enc)} and {dec} = {hf.get(dec)} differ: minipt's "
                             "Transformer has the same in encoder and decoder")
    pad = hf.get("pad_token_id", 58100)
    if not isinstance(pad, int) or isinstance(pad, bool) or not 0 <= pad < V:
        raise ValueError(f"config.json: pad_token_id = {pad!r} is not a token id below vocab_size {V}")
    P = get_int(hf, "max_position_embeddings", 1024)
    return TransformerConfig(vocab_size=V, share_embeddings=True, n_encoder_layers=get_int(hf, "encoder_layers", 12),
                             n_decoder_layers=get_int(hf, "decoder_layers", 12),
                             n_head=get_int(hf, "encoder_attention_heads", 16), d_model=get_int(hf, "d_model", 1024),
                             d_ff=get_int(hf, "encoder_ffn_dim", 4096), max_source_len=P, max_target_len=P, pad_id=pad,
                             prenorm=False, activation=ACTIVATION[act], dropout=get_float(hf, "dropout", 0.1), eps=EPS)


def config_to_hf(c: TransformerConfig, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    """minipt's ``TransformerConfig`` -> the ``config.json`` that ``MarianMTModel`` reads."""
    return {
        "architectures": [ARCHITECTURE], "model_type": MODEL_TYPE, "vocab_size": c.vocab_size,
        "decoder_vocab_size": c.vocab_size, "max_position_embeddings": max(c.max_source_len, c.max_target_len),
        "d_model": c.d_model, "encoder_layers": c.n_encoder_layers, "decoder_layers": c.n_decoder_layers,
        "encoder_attention_heads": c.n_head, "decoder_attention_heads": c.n_head,
        "encoder_ffn_dim": c.d_ff, "decoder_ffn_dim": c.d_ff,
        "activation_function": {v: k for k, v in ACTIVATION.items()}[c.activation],
        "dropout": c.dropout, "attention_dropout": c.dropout, "activation_dropout": 0.0,
        "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "init_std": 0.02, "scale_embedding": True,
        "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True, "is_encoder_decoder": True,
        "use_cache": True, "pad_token_id": c.pad_id, "eos_token_id": eos, "forced_eos_token_id": None,
        "decoder_start_token_id": c.pad_id if bos is None else bos, "bos_token_id": None,
        "dtype": dtype, "torch_dtype": dtype,
    }
