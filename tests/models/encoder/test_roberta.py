"""RoBERTa: whole-model gradcheck (MLM only, tied decoder), positions numbered as the
reference (padding_idx + 1 onwards) against NumPy, the MLM loss against NumPy, its
byte-level BPE with RoBERTa's special ids, bad input."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.core.module import eval_mode
from minipt.models.encoder import roberta
from minipt.models.encoder.roberta import RobertaConfig, RobertaTokenizer, tiny
from minipt.objectives.common import IGNORE
from minipt.tokenizers.base import Tokenizer


def test_whole_model_gradcheck_mlm_only_with_tied_decoder():
    model, batch = tiny()
    result = check_module(model, *batch, select=lambda out: out[0], max_checks=5)
    assert result.passed, str(result)
    names = {a.name for a in result.arrays}
    assert "encoder.embeddings.word_embeddings.weight" in names and "mlm.decoder.weight" not in names
    assert not any(n.startswith(("pooler.", "nsp.")) for n in model.parameters())


def left_padded(ids, mlm):
    """The tiny batch with row 1's padding moved to the front."""
    ids, mlm = ids.copy(), mlm.copy()
    n = int((ids[1] == roberta.P).sum())
    ids[1], mlm[1] = np.roll(ids[1], n), np.roll(mlm[1], n)
    return ids, (ids != roberta.P).astype(np.int64), mlm


@pytest.mark.parametrize("side", ["right", "left"])
def test_every_token_reads_the_reference_position(side):
    """The reference numbers positions cumsum(ids != pad) * (ids != pad) + pad."""
    model, (ids, seg, mask, mlm) = tiny()
    if side == "left":
        ids, mask, mlm = left_padded(ids, mlm)
        assert ids[1, 0] == roberta.P and ids[1, 2] == roberta.S
    pad = model.config.pad_token_id
    real = ids != pad
    reference = np.cumsum(real, axis=1) * real + pad                             # (B, T)
    P = model.parameters()
    e = "encoder.embeddings."
    x = P[e + "word_embeddings.weight"][ids] + P[e + "token_type_embeddings.weight"][seg] \
        + P[e + "position_embeddings.weight"][reference]
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    want = (x - mu) / np.sqrt(var + 1e-5) * P[e + "ln.weight"] + P[e + "ln.bias"]
    with eval_mode(model):
        got = model.encoder.embeddings(ids, seg)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)                 # padding slots too
    assert reference[0, 0] == 2 == model.config.position_offset
    assert reference[1, int(np.argmax(real[1]))] == 2                            # first real token: 2 either way


def test_left_padding_gives_the_real_tokens_the_outputs_of_right_padding():
    model, (ids, seg, mask, mlm) = tiny()
    lids, lmask, lmlm = left_padded(ids, mlm)
    with eval_mode(model):
        right_loss, right = model(ids, seg, mask, mlm)
        left_loss, left = model(lids, seg, lmask, lmlm)
    np.testing.assert_allclose(left[lmask == 1], right[mask == 1], rtol=0, atol=1e-12)
    assert float(left_loss) == pytest.approx(float(right_loss), rel=1e-12)


def test_gradcheck_of_a_left_padded_batch_reaches_every_position_row_read():
    model, (ids, seg, mask, mlm) = tiny()
    lids, lmask, lmlm = left_padded(ids, mlm)
    result = check_module(model, lids, seg, lmask, lmlm, select=lambda out: out[0], max_checks=6)
    assert result.passed, str(result)
    result = check_module(model.encoder, lids, seg, lmask, max_checks=8)       # random upstream gradient
    assert result.passed, str(result)
    model.zero_grad()
    model.encoder(lids, seg, lmask)
    model.encoder.backward(np.random.default_rng(0).standard_normal((2, 7, model.config.d_model)))
    g = model.gradients()["encoder.embeddings.position_embeddings.weight"]
    assert np.abs(g[1]).max() > 0 and np.abs(g[2:9]).max(axis=1).min() > 0 and not g[0].any()


def test_mlm_loss_against_numpy_with_padding_never_counted():
    model, (ids, seg, mask, mlm) = tiny()
    labelled = mlm.copy()
    labelled[1, 6] = 7                                                           # a label on padding
    with eval_mode(model):
        loss, logits = model(ids, seg, mask, labelled)
    keep = (mlm != IGNORE)
    z = logits[keep]
    logz = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    want = np.mean(logz - z[np.arange(len(z)), mlm[keep]])
    assert float(loss) == pytest.approx(want, rel=1e-12)


def test_byte_level_bpe_puts_robertas_specials_first(tmp_path):
    tok = RobertaTokenizer().fit("the cat sat on the mat. the dog sat on the log. " * 10, 20)
    assert tok.special_tokens == {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    text = "<s>the cat, é 猫 🙂</s><pad>"
    ids = tok.encode(text)
    assert ids[0] == 0 and ids[-2:] == [2, 1] and tok.decode(ids) == text
    assert len(tok.encode("the cat")) < len("the cat".encode())                 # merges learned
    tok.save(tmp_path / "tok.json")
    again = Tokenizer.load(tmp_path / "tok.json")
    assert type(again) is RobertaTokenizer and again.encode(text) == ids


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="pad_token_id \\+ 1 = 2, got position_offset 0"):
        RobertaConfig(position_offset=0)
    with pytest.raises(ValueError, match="no NSP head"):
        RobertaConfig(nsp=True)
    with pytest.raises(ValueError, match="pad_token_id 70 is outside"):
        RobertaConfig(pad_token_id=70, position_offset=71, max_position=80)
    model, (ids, seg, mask, mlm) = tiny()
    with pytest.raises(ValueError, match="nsp_labels were given but this model has no NSP head"):
        model(ids, seg, mask, mlm, np.array([0, 1]))
    long = np.ones((1, 9), dtype=np.int64)                                     # 8 positions after the offset
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_position 10 minus position_offset 2"):
        model(long)
    with pytest.raises(ValueError, match=r"token_type_ids: expected segment ids 0 \(A\) to 0, got \[1\]"):
        model(ids, np.ones_like(ids), mask, mlm)                               # one segment only
    assert roberta.tiny_batch()[0].shape == (2, 7)
