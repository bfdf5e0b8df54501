"""Optional: transformers loads a BART folder minipt saved and computes the same thing, and
its greedy generation equals minipt's KV-cached greedy decoding.

Skipped unless torch and transformers are installed; run by hand with

    MINIPT_NUMBA=0 PYTHONPATH=$PWD /work/hfvenv/bin/python -m pytest -q -o addopts="" tests/interop/test_bart_transformers.py

(torch 2.13.0, transformers 5.23.0; BART is float64 throughout there: 1e-12).
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minipt.core.module import eval_mode  # noqa: E402
from minipt.inference.seq2seq_decoding import greedy  # noqa: E402
from minipt.interop import save_pretrained  # noqa: E402
from minipt.models.seq2seq.bart import Bart, BartConfig  # noqa: E402

CASES = {"gelu": BartConfig(vocab_size=50, max_positions=24, encoder_layers=2, decoder_layers=3, n_head=4, d_model=32,
                            d_ff=48),
         "relu-ids": BartConfig(vocab_size=50, max_positions=24, encoder_layers=2, decoder_layers=3, n_head=4,
                                d_model=32, d_ff=48, activation="relu", pad_id=0, eos_id=7, decoder_start_id=9)}


def random_model(config: BartConfig, seed: int = 0) -> Bart:
    model = Bart(config, rng=np.random.default_rng(seed), dtype=np.float64)
    rng = np.random.default_rng(seed + 1)
    for name, p in model.named_parameters():                 # gains ~ 1, everything else random
        p[...] = rng.normal(1.0 if p.ndim == 1 and "ln" in name and name.endswith("weight") else 0.0, 0.3, p.shape)
    model.shared.params["weight"] *= 4.0                     # token identity outweighs the biases: varied output
    model.params["final_logits_bias"] *= 0.1
    return model


@pytest.mark.parametrize("name", list(CASES))
def test_transformers_computes_what_minipt_computes(name, tmp_path):
    config = CASES[name]
    model = random_model(config)
    save_pretrained(model, tmp_path / "m")
    hf, info = transformers.BartForConditionalGeneration.from_pretrained(tmp_path / "m", output_loading_info=True)
    hf.eval()
    assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    rng = np.random.default_rng(2)
    src = rng.integers(10, config.vocab_size, (2, 11))
    src[1, 8:] = config.pad_id
    targets = rng.integers(10, config.vocab_size, (2, 9))
    with eval_mode(model):
        _, ours = model(src, model.decoder_input(targets), targets)
    tokens = [[config.decoder_start_id] + r for r in greedy(model, src, start_id=config.decoder_start_id, eos_id=-1,
                                                             max_new_tokens=15)]
    mask = torch.tensor(src != config.pad_id).long()
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor(src), attention_mask=mask, labels=torch.tensor(targets)).logits.numpy()
        out = hf.generate(input_ids=torch.tensor(src), attention_mask=mask, do_sample=False, num_beams=1,
                          max_new_tokens=15, eos_token_id=None, forced_bos_token_id=None, forced_eos_token_id=None,
                          no_repeat_ngram_size=0, use_cache=True).numpy()
    assert np.abs(ours - theirs).max() <= 1e-12 * np.abs(theirs).max()
    np.testing.assert_array_equal(tokens, out)
    assert len({t for r in tokens for t in r[1:]}) > 2, "a degenerate greedy output checks little"
