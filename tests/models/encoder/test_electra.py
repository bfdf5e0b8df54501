"""ELECTRA: whole-model gradcheck (generator and discriminator, shared embeddings, tied
decoder), the loss composition L_MLM + 50 L_Disc against NumPy, the corrupted input and
its labels, no gradient through the sampling, samples that follow the generator's
softmax, deterministic evaluation, parameter count, bad input."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.core.module import eval_mode
from minipt.models.encoder.electra import ELECTRA_TINY, ElectraConfig, build, tiny
from minipt.objectives.common import IGNORE
from minipt.ops.cross_entropy import cross_entropy_backward, cross_entropy_forward


def test_whole_model_gradcheck_through_shared_embeddings():
    model, batch = tiny()
    shared = model.discriminator.embeddings, model.generator.embeddings
    for key in ("word_embeddings", "position_embeddings", "token_type_embeddings", "ln"):
        a, b = getattr(shared[0], key), getattr(shared[1], key)
        assert all(a.params[k] is b.params[k] and a.grads[k] is b.grads[k] for k in a.params)
    result = check_module(model, *batch, select=lambda out: out[0], max_checks=5)
    assert result.passed, str(result)
    names = {a.name for a in result.arrays}
    assert {"discriminator.embeddings.word_embeddings.weight", "generator.embedding_projection.weight",
            "generator_head.bias", "discriminator_head.dense_prediction.weight"} <= names
    assert not any(n.startswith("generator.embeddings.") for n in names)     # one array, named once


def test_loss_is_mlm_plus_fifty_times_detection_against_numpy():
    model, (ids, seg, mask, mlm) = tiny()
    with eval_mode(model):
        out = model.outputs(ids, seg, mask, mlm)
    keep = mlm != IGNORE
    z = out.generator_logits[keep]
    logz = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    mlm_loss = np.mean(logz - z[np.arange(len(z)), mlm[keep]])
    originals = np.where(keep, mlm, ids)
    replaced = (out.corrupted != originals).astype(int)
    real = mask.astype(bool)
    d, y = out.logits[real], replaced[real]
    bce = np.mean(np.log1p(np.exp(-d)) * y + np.log1p(np.exp(d)) * (1 - y))    # every real token
    assert float(out.mlm_loss) == pytest.approx(mlm_loss, rel=1e-12)
    assert float(out.disc_loss) == pytest.approx(bce, rel=1e-12)
    assert float(out.loss) == pytest.approx(mlm_loss + 50.0 * bce, rel=1e-12)
    assert np.array_equal(out.corrupted[~keep], ids[~keep])                  # only masked slots change
    assert np.array_equal(out.replaced[real], y) and np.all(out.replaced[~real] == IGNORE)
    assert 0 < y.sum() < keep.sum() + 1


def test_no_gradient_flows_through_the_sampling_into_the_generator():
    model, (ids, seg, mask, mlm) = tiny()
    with eval_mode(model):
        model.zero_grad()
        model(ids, seg, mask, mlm)
        model.backward()
        full = {k: g.copy() for k, g in model.named_grads()}
        model.zero_grad()                                                        # L_MLM alone, by hand
        logits = model.generator_head(model.generator(ids, seg, mask))
        _, cache = cross_entropy_forward(logits, mlm)
        model.generator.backward(model.generator_head.backward(cross_entropy_backward(1.0, cache)))
        mlm_only = dict(model.named_grads())
    generator_own = [k for k in full if k.startswith(("generator.", "generator_head."))]
    assert len(generator_own) > 10
    for k in generator_own:
        np.testing.assert_allclose(full[k], mlm_only[k], rtol=0, atol=1e-12, err_msg=k)
    emb = "discriminator.embeddings.word_embeddings.weight"                       # the disc loss reaches it
    assert np.abs(full[emb] - mlm_only[emb]).max() > 1e-6
    # and numerically: nudging a generator weight moves L only as much as it moves L_MLM
    w = model.parameters()["generator.stack.blocks.0.mlp.c_fc.weight"]
    h, moved = 1e-5, []
    with eval_mode(model):
        for step in (h, -h):
            w[0, 0] += step
            out = model.outputs(ids, seg, mask, mlm)
            moved.append((float(out.loss), float(out.mlm_loss)))
            w[0, 0] -= step
    dl, dmlm = (moved[0][0] - moved[1][0]) / (2 * h), (moved[0][1] - moved[1][1]) / (2 * h)
    assert dl == pytest.approx(dmlm, rel=1e-6) and dl == pytest.approx(full["generator.stack.blocks.0.mlp.c_fc.weight"][0, 0],
                                                                       rel=1e-5)


def test_samples_follow_the_generator_softmax():
    model = build(rng=np.random.default_rng(0), **ELECTRA_TINY)
    logits = np.array([[[2.0, 1.0, 0.0, -1.0] + [-30.0] * 7]]).repeat(20000, axis=1)   # (1, N, V)
    samples = model.sample(logits, np.ones(logits.shape[:2], dtype=bool))[0]
    p = np.exp(logits[0, 0]) / np.exp(logits[0, 0]).sum()
    freq = np.bincount(samples, minlength=11) / samples.size
    sigma = np.sqrt(p * (1 - p) / samples.size)
    assert np.all(np.abs(freq - p) <= 4 * sigma + 1e-12), (freq, p)


def test_evaluation_is_deterministic_training_resamples():
    model, batch = tiny()
    with eval_mode(model):
        a, b = model.outputs(*batch), model.outputs(*batch)
    assert np.array_equal(a.corrupted, b.corrupted) and float(a.loss) == float(b.loss)
    model.train()
    draws = {tuple(model.outputs(*batch).corrupted.ravel()) for _ in range(8)}
    assert len(draws) > 1


def test_parameter_count_shares_the_embeddings_once():
    c = ElectraConfig(**ELECTRA_TINY)
    model = build(rng=np.random.default_rng(0), **ELECTRA_TINY)
    V, P, E, H, F, G, FG, L = c.vocab_size, c.max_position, c.embed_dim, c.d_model, c.d_ff, c.generator_d_model, \
        c.generator_d_ff, c.n_layer
    layer = lambda d, f: 4 * (d * d + d) + (d * f + f + f * d + d) + 4 * d
    want = ((V + P + 2) * E + 2 * E                     # shared embeddings
            + (E * H + H) + L * layer(H, F)              # discriminator
            + (E * G + G) + L * layer(G, FG)             # generator
            + (G * E + E + 2 * E + V)                    # generator MLM head, decoder tied
            + (H * H + H + H + 1))                       # discriminator head
    assert model.num_parameters() == want


def test_bad_input_is_refused_by_name():
    model, (ids, seg, mask, mlm) = tiny()
    with pytest.raises(ValueError, match="mlm_labels are required"):
        model(ids, seg, mask)
    with pytest.raises(ValueError, match="no predicted position"):
        model(ids, seg, mask, np.full_like(mlm, IGNORE))
    with pytest.raises(ValueError, match="disc_weight \\(lambda\\) must be > 0"):
        ElectraConfig(disc_weight=0.0)
    with pytest.raises(ValueError, match="d_model 6 is not divisible by n_head 4"):
        ElectraConfig(generator_d_model=6, generator_n_head=4)
    with pytest.raises(IndexError, match="input_ids"):
        model(ids + 100, seg, mask, mlm)
    with pytest.raises(RuntimeError, match="forward first"):
        build(rng=np.random.default_rng(0), **ELECTRA_TINY).backward()
