"""MASS (models/seq2seq/mass.py): the decoder input rule, the fragment lengths k = 1 (BERT-
like) and k = m (GPT-like), the reuse of ``objectives.unified.mass``, values against BART's
network. The whole-model and k = 1 float64 gradchecks run through the registry entry in
tests/models/test_protocol.py."""
import numpy as np
import pytest

from minipt.models.protocol import IGNORE
from minipt.models.seq2seq.bart import Bart
from minipt.models.seq2seq.mass import MASS, MASSConfig, mass_batch, tiny
from minipt.objectives.unified import mass

ROWS = np.array([[0, 5, 6, 7, 8, 9, 10, 2], [0, 8, 9, 4, 6, 5, 7, 2]])
M = 3                                                       # [MASK] in the tiny vocabulary


def test_decoder_sees_the_fragment_shifted_and_masks_elsewhere():
    model, _ = tiny()
    targets = np.array([[IGNORE, IGNORE, 6, 7, 8, IGNORE]])
    np.testing.assert_array_equal(model.decoder_input(targets), [[M, M, M, 6, 7, M]])


def test_mass_batch_is_the_objective_laid_out_over_the_sentence():
    enc, targets = mass_batch(ROWS, np.random.default_rng(4), M, fragment=0.5)
    r = np.random.default_rng(4)
    for b in range(2):
        e, dec, frag, start = mass(ROWS[b], r, M, 0.5)            # the same draws, one row at a time
        np.testing.assert_array_equal(enc[b], e)
        np.testing.assert_array_equal(targets[b, start:start + 4], frag)
        assert (targets[b] != IGNORE).sum() == 4 and (enc[b] == M).sum() == 4
        decoder = MASS.decoder_input(tiny()[0], targets[b:b + 1])[0]
        np.testing.assert_array_equal(decoder[start:start + 4], dec)   # the objective's decoder input


def test_k1_is_bert_like_and_km_is_gpt_like():
    enc1, t1 = mass_batch(ROWS, np.random.default_rng(0), M, fragment=0.0)
    assert ((t1 != IGNORE).sum(axis=1) == 1).all() and ((enc1 == M).sum(axis=1) == 1).all()
    model, _ = tiny()
    assert (model.decoder_input(t1) == M).all()                 # k = 1: no decoder context at all
    encm, tm = mass_batch(ROWS, np.random.default_rng(0), M, fragment=1.0)
    assert (encm == M).all() and (tm == ROWS).all()               # k = m: nothing to read in the encoder
    np.testing.assert_array_equal(model.decoder_input(tm)[:, 1:], ROWS[:, :-1])   # a left-to-right LM


def test_mass_is_barts_network_with_its_own_decoder_input():
    model, (enc, dec_in, targets) = tiny()
    np.testing.assert_array_equal(dec_in, model.decoder_input(targets))
    loss, logits = model(enc, dec_in, targets)
    same = Bart(model.config, rng=np.random.default_rng(0), dtype=np.float64)
    same.load_state_dict(model.state_dict())
    ref = same(enc, dec_in)[1]
    np.testing.assert_array_equal(logits, ref)
    assert model.config.decoder_start_id == model.config.mask_id == M
    assert model.spec()["model"] == "mass"


def test_bad_input():
    with pytest.raises(ValueError, match="mask_id 99 is outside"):
        MASSConfig(vocab_size=11, mask_id=99)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        mass_batch(np.array([[4]]), np.random.default_rng(0), M)
    with pytest.raises(ValueError, match="rows"):
        mass_batch(np.array([4, 5, 6]), np.random.default_rng(0), M)
