"""word2vec: float64 gradchecks of the four variants, the kernel against its twin and against
the gradient, the Huffman tree, the unigram^0.75 table, subsampling, windows, learning, bad input."""
import numpy as np
import pytest

from minipt import kernels
from minipt.core.gradcheck import check_module
from minipt.models.classic.word2vec import Word2Vec, huffman_tree, tiny_variant
from minipt.ops.word2vec import word2vec_sgd_numpy

VARIANTS = [(a, o) for a in ("cbow", "skipgram") for o in ("neg", "hs")]


@pytest.mark.parametrize("arch,output", VARIANTS)
def test_gradcheck_float64(arch, output):
    model, batch = tiny_variant(arch, output)
    result = check_module(model, *batch, select=lambda out: out[0])
    assert result.passed, str(result)


def _sgd_batch(arch, output, dtype):
    model, (ctx, target, negatives) = tiny_variant(arch, output)
    model.to(dtype)
    rows, labels = model.output_rows(target, negatives)
    return model, ctx, rows, labels.astype(dtype)


@pytest.mark.skipif(kernels.get("word2vec_sgd") is None, reason="Numba kernels are off")
@pytest.mark.parametrize("arch,output", VARIANTS)
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_numba_kernel_matches_numpy_twin(arch, output, dtype, tol):
    model, ctx, rows, labels = _sgd_batch(arch, output, dtype)
    rows[1, 1] = rows[1, 0]                     # a repeated output row inside one example
    a_in, a_out = model.params["v_in"].copy(), model.params["v_out"].copy()
    b_in, b_out = a_in.copy(), a_out.copy()
    loss_a = kernels.get("word2vec_sgd")(a_in, a_out, ctx, rows, labels, 0.1, True)
    loss_b = word2vec_sgd_numpy(b_in, b_out, ctx, rows, labels, 0.1, True)
    assert a_in.dtype == dtype
    np.testing.assert_allclose(a_in, b_in, atol=tol, rtol=0)
    np.testing.assert_allclose(a_out, b_out, atol=tol, rtol=0)
    assert loss_a == pytest.approx(loss_b, rel=1e-6)
    assert not np.allclose(a_in, model.params["v_in"])      # something was updated
    c_in, c_out = model.params["v_in"].copy(), model.params["v_out"].copy()
    assert kernels.get("word2vec_sgd")(c_in, c_out, ctx, rows, labels, 0.1, False) == 0.0
    np.testing.assert_array_equal(c_in, a_in)               # the loss flag changes nothing else


@pytest.mark.parametrize("arch,output", VARIANTS)
def test_one_sgd_step_is_minus_lr_times_the_gradient(arch, output):
    model, ctx, rows, labels = _sgd_batch(arch, output, np.float64)
    one = slice(0, 1)
    from minipt.ops.word2vec import word2vec_loss_backward, word2vec_loss_forward
    loss, _, cache = word2vec_loss_forward(model.params["v_in"], model.params["v_out"], ctx[one], rows[one],
                                           labels[one])
    d_in, d_out = word2vec_loss_backward(1.0, cache)
    v_in, v_out = model.params["v_in"].copy(), model.params["v_out"].copy()
    total = word2vec_sgd_numpy(v_in, v_out, ctx[one], rows[one], labels[one], 0.01)
    assert total == pytest.approx(float(loss))
    np.testing.assert_allclose(v_in - model.params["v_in"], -0.01 * d_in, atol=1e-14)
    np.testing.assert_allclose(v_out - model.params["v_out"], -0.01 * d_out, atol=1e-14)


def test_huffman_tree_gives_frequent_words_short_codes():
    counts = np.array([50, 20, 10, 10, 5, 5])
    points, codes = huffman_tree(counts)
    lengths = (points >= 0).sum(1)
    assert lengths[0] == 1 and lengths[0] <= lengths[1] <= lengths[4]
    # prefix-free codes and every inner node used: V-1 nodes, root 0 shared by all
    words = {tuple(c[:l]) for c, l in zip(codes, lengths)}
    assert len(words) == 6 and (points[:, 0] == counts.size - 2).all()
    assert set(points[points >= 0]) == set(range(5))
    # the sigmoids along the paths form a distribution over the words for any h
    rng = np.random.default_rng(0)
    nodes, h = rng.normal(size=(5, 3)), rng.normal(size=3)
    p = [np.prod([1 / (1 + np.exp(-(1 - 2 * c) * nodes[n] @ h)) for n, c in zip(pp[:l], cc[:l])])
         for pp, cc, l in zip(points, codes, lengths)]
    assert sum(p) == pytest.approx(1.0)


def test_negative_table_follows_unigram_to_the_three_quarters():
    counts = np.array([1000, 100, 10, 1])
    model = Word2Vec(4, counts=counts, table_size=1_000_000, rng=np.random.default_rng(0))
    freq = np.bincount(model.table, minlength=4) / model.table_size
    expected = counts ** 0.75 / (counts ** 0.75).sum()
    np.testing.assert_allclose(freq, expected, atol=2e-6)


def test_subsampling_keeps_rare_words_and_drops_frequent_ones():
    counts = np.array([100_000, 10])
    model = Word2Vec(2, counts=counts, sample=1e-3, rng=np.random.default_rng(0))
    tokens = np.array([0] * 10000 + [1] * 10000)
    keep = model.subsample(tokens, np.random.default_rng(1))
    f = 100_000 / 100_010
    assert keep[:10000].mean() == pytest.approx((np.sqrt(f / 1e-3) + 1) * 1e-3 / f, abs=0.01)
    assert keep[10000:].all()


def test_dynamic_window_and_sequence_boundaries():
    model = Word2Vec(20, window=3, arch="skipgram", rng=np.random.default_rng(0))
    tokens = np.arange(10)
    seg = np.array([0] * 5 + [1] * 5)
    ctx, target = model.examples(tokens, seg, np.random.default_rng(0))
    assert (np.abs(ctx[:, 0] - target) <= 3).all() and (seg[ctx[:, 0]] == seg[target]).all()
    dist = np.abs(ctx[:, 0] - target)
    counts = [0, *[np.sum(dist == d) for d in (1, 2, 3)]]
    assert counts[1] >= counts[2] >= counts[3]
    cb = Word2Vec(20, window=2, arch="cbow", rng=np.random.default_rng(0))
    ctx, target = cb.examples(tokens, np.zeros(10, int), np.random.default_rng(0))
    assert ctx.shape == (10, 4) and ((ctx == -1) | (np.abs(ctx - target[:, None]) <= 2)).all()


@pytest.mark.parametrize("arch,output", VARIANTS)
def test_training_separates_two_topics(arch, output):
    """Two disjoint halves of the vocabulary never co-occur: after training, words are
    closer to their own half than to the other."""
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 10, 30) + 10 * (i % 2) for i in range(300)]
    counts = np.bincount(np.concatenate(docs), minlength=20)
    model = Word2Vec(20, dim=8, arch=arch, output=output, window=3, sample=0, counts=counts,
                     rng=np.random.default_rng(1))
    model.fit(docs, epochs=3, rng=np.random.default_rng(2))
    v = model.vectors() / np.linalg.norm(model.vectors(), axis=1, keepdims=True)
    sims = v @ v.T
    same = np.add.outer(np.arange(20) // 10, np.zeros(20)) == np.arange(20)[None, :] // 10
    off = ~np.eye(20, dtype=bool)
    assert sims[same & off].mean() - sims[~same].mean() > 0.3


def test_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="window must be an integer >= 1, got 0"):
        Word2Vec(5, window=0, rng=rng)
    with pytest.raises(ValueError, match="negative must be an integer >= 1, got 0"):
        Word2Vec(5, negative=0, rng=rng)
    with pytest.raises(ValueError, match="arch"):
        Word2Vec(5, arch="glove", rng=rng)
    with pytest.raises(ValueError, match="at least 2 words"):
        Word2Vec(1, output="hs", rng=rng)
    model = Word2Vec(5, rng=rng)
    with pytest.raises(ValueError, match="corpus has 1 token"):
        model.fit([np.array([1])], rng=rng)
    with pytest.raises(ValueError, match="needs negatives"):
        model(np.array([[1]]), np.array([2]))
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model(np.array([[1]]), np.array([7]), np.array([[1]]))
