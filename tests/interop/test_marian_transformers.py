"""minipt's Vaswani Transformer as transformers' ``MarianMTModel`` (``marian_layout.py``).

Without torch: the channel reordering is a bitwise round trip, it is what makes Marian's
sinusoid minipt's, and configs Marian cannot hold are refused by name. With torch and
transformers (float64): a right-padded batch gives minipt's logits at every real position
(relative error 1e-7: transformers builds Marian's sinusoid in float32 even
for a float64 model) and ``generate`` writes minipt's greedy tokens.
"""
import json

import numpy as np
import pytest

from minipt.interop import from_pretrained, save_pretrained
from minipt.interop.layout import deinterleave
from minipt.models.seq2seq.transformer import Transformer, TransformerConfig
from minipt.nn.positions import sinusoidal_table

SMALL = dict(vocab_size=23, n_encoder_layers=2, n_decoder_layers=2, n_head=2, d_model=8, d_ff=12,
             max_source_len=10, max_target_len=8, pad_id=0)


def random_model(dtype=np.float64, **kw) -> Transformer:
    model = Transformer(TransformerConfig(**{**SMALL, **kw}), rng=np.random.default_rng(0), dtype=dtype)
    rng = np.random.default_rng(1)
    for _, p in model.named_parameters():
        p[...] = rng.normal(1.0 if p.ndim == 1 else 0.0, 0.3, p.shape)
    return model


def marian_sinusoid(n_pos: int, dim: int) -> np.ndarray:
    """transformers' MarianSinusoidalPositionalEmbedding.create_weight, written out: every
    sine (of the frequencies 10000^(-2i/dim)) first, then every cosine."""
    angle = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)])
    return np.concatenate([np.sin(angle[:, 0::2]), np.cos(angle[:, 1::2])], axis=1)


def test_deinterleaving_makes_minipts_sinusoid_marians():
    ours = sinusoidal_table(10, 8, np.float64)                         # (T, C): sin, cos, sin, cos, ...
    np.testing.assert_allclose(ours[:, deinterleave(8)], marian_sinusoid(10, 8), atol=1e-12)
    assert not np.allclose(ours, marian_sinusoid(10, 8))               # so the reordering is needed


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_round_trip_is_bitwise(activation, tmp_path):
    model = random_model(activation=activation)
    save_pretrained(model, tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert (config["model_type"], config["scale_embedding"], config["activation_function"]) == \
        ("marian", True, activation)
    back = from_pretrained(tmp_path / "m")
    assert type(back) is Transformer                                  # Marian has one position limit: the longer
    assert back.config == TransformerConfig(**{**SMALL, "activation": activation, "max_target_len": 10})
    for name, p in model.parameters().items():
        assert np.array_equal(back.parameters()[name], p), name


@pytest.mark.parametrize("change,says", [(dict(prenorm=True), "prenorm=True"),
                                         (dict(share_embeddings=False, src_vocab_size=30), "share_embeddings=False"),
                                         (dict(eps=1e-6), "eps=1e-06"), (dict(activation="swiglu"), "swiglu")])
def test_configs_marian_cannot_hold_are_refused_by_name(change, says, tmp_path):
    with pytest.raises(ValueError, match=says):
        save_pretrained(random_model(**change), tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_transformers_computes_the_same_logits_and_greedy_tokens(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from minipt.core.module import eval_mode
    from minipt.inference.seq2seq_decoding import greedy
    model = random_model()
    save_pretrained(model, tmp_path / "m")
    theirs = transformers.MarianMTModel.from_pretrained(tmp_path / "m", dtype=torch.float64).eval()
    src = np.array([[5, 6, 7, 8, 9, 10, 11, 3], [12, 13, 14, 15, 2, 0, 0, 0]])         # right-padded
    target_in = np.array([[1, 4, 5, 6, 7], [1, 8, 9, 20, 21]])
    with eval_mode(model):
        _, logits = model(src, target_in)
    with torch.no_grad():
        ref = theirs(input_ids=torch.tensor(src), attention_mask=torch.tensor(src != 0),
                     decoder_input_ids=torch.tensor(target_in)).logits.numpy()
    assert np.abs(logits - ref).max() / np.abs(ref).max() < 1e-7        # Marian's sinusoid is made in float32
    ours = greedy(model, src, start_id=1, eos_id=2, max_new_tokens=7)       # <s> = 1 starts, </s> = 2 ends
    settings = dict(do_sample=False, num_beams=1, max_new_tokens=7, min_new_tokens=0, eos_token_id=2, pad_token_id=0,
                    decoder_start_token_id=1)
    with torch.no_grad():
        rows = theirs.generate(input_ids=torch.tensor(src), attention_mask=torch.tensor(src != 0), **settings)
    rows = [r[1:].tolist() for r in rows]                                   # without the start token
    assert ours == [r[:r.index(2)] if 2 in r else r for r in rows]           # up to </s>
    assert any(len(o) > 3 for o in ours)
