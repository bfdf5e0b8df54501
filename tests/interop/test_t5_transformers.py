"""Optional: transformers loads T5 folders minipt saved, computes the same logits, and its
greedy ``generate`` writes the same tokens as minipt's cached greedy decoding.

Skipped unless torch and transformers are installed; run by hand with

    PYTHONPATH=$PWD:/work/hfvenv/lib/python3.11/site-packages .venv/bin/python -m pytest -q -n 0 \
        tests/interop/test_t5_transformers.py

(minipt's venv for numba, the reference environment's torch 2.13.0 and transformers 5.23.0).

transformers' T5LayerNorm takes the mean square in float32 even in a float64 model, so
logits agree to float32 rounding (1e-5); the greedy tokens must be identical.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minipt.core.module import eval_mode  # noqa: E402
from minipt.inference.seq2seq_decoding import greedy  # noqa: E402
from minipt.interop import save_pretrained  # noqa: E402
from minipt.models.seq2seq.t5 import T5, T5Config, shift_right  # noqa: E402

CASES = {"v1_0": dict(ffn="relu"), "v1_1-tied": dict(ffn="gated-gelu", scale_output=False),
         "v1_1-untied": dict(ffn="gated-gelu", scale_output=False, tie_embeddings=False)}


def random_model(seed: int = 0, **kw) -> T5:
    model = T5(T5Config(vocab_size=30, d_model=16, d_ff=24, n_layer=2, n_decoder_layer=2, n_head=2, num_buckets=8,
                        max_distance=12, max_source_len=16, max_target_len=16, **kw),
               rng=np.random.default_rng(seed), dtype=np.float64)
    rng = np.random.default_rng(seed + 1)
    for name, p in model.named_parameters():
        p[...] = rng.normal(1.0, 0.1, p.shape) if p.ndim == 1 else rng.normal(0.0, 0.5, p.shape)
    return model


@pytest.mark.parametrize("name", list(CASES))
def test_transformers_computes_the_same_logits_and_greedy_tokens(name, tmp_path):
    model = random_model(**CASES[name])
    save_pretrained(model, tmp_path / "t5")
    theirs = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "t5", dtype=torch.float64).eval()
    src = np.array([[5, 6, 7, 8, 9, 10, 11, 3], [12, 13, 14, 15, 2, 0, 0, 0]])
    labels = np.array([[4, 5, 6, 7, 1], [8, 9, 1, 20, 21]])
    with eval_mode(model):
        _, logits = model(src, shift_right(labels, 0), labels)
    with torch.no_grad():
        ref = theirs(input_ids=torch.tensor(src), attention_mask=torch.tensor(src != 0),
                     labels=torch.tensor(labels)).logits.numpy()
    assert np.abs(logits - ref).max() / np.abs(ref).max() < 1e-5
    ours = greedy(model, src, start_id=0, eos_id=1, max_new_tokens=12)
    with torch.no_grad():
        gen = theirs.generate(input_ids=torch.tensor(src), attention_mask=torch.tensor(src != 0), do_sample=False,
                              num_beams=1, max_new_tokens=12, min_new_tokens=0, eos_token_id=1, pad_token_id=0,
                              decoder_start_token_id=0).numpy()
    for b in range(2):
        row = [int(t) for t in gen[b, 1:]]                                    # without the start token
        row = row[:row.index(1)] if 1 in row else row                          # up to </s>
        assert ours[b] == row, (ours[b], row)
    assert any(len(o) > 3 for o in ours)
