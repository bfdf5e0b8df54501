"""XLNet: forward values against a position-by-position loop, what each stream may see,
bad orders refused by name, and a few training steps of the recipe."""
import math

import numpy as np
import pytest

from minipt.models import registry
from minipt.models.protocol import IGNORE
from minipt.models.unified.xlnet import XLNet, XLNetConfig, tiny_model


def _ln(x, w, b, eps):
    return (x - x.mean()) / math.sqrt(x.var() + eps) * w + b


def _gelu(x):
    return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def naive_logits(model: XLNet, idx, order, tt=None):
    """The paper's equations one position at a time: ranks from the order, r_{i-j} from the
    sinusoid formula for each pair (no table, no shift), a softmax over the allowed keys."""
    c = model.config
    B, T = idx.shape
    C, H = c.d_model, c.n_head
    D = C // H
    freqs = [10000.0 ** (-2 * k / C) for k in range(C // 2)]
    rel = lambda m: np.array([math.sin(m * f) for f in freqs] + [math.cos(m * f) for f in freqs])
    W = model.word_embedding.params["weight"]
    out = np.zeros((B, T, c.vocab_size))
    for b in range(B):
        rank = {int(p): r for r, p in enumerate(order[b])}
        h = [W[idx[b, i]].copy() for i in range(T)]
        g = [model.params["mask_emb"][0, 0].copy() for _ in range(T)]
        for layer in model.layer:
            p = layer.rel_attn.params
            ln_a, ff = layer.rel_attn.layer_norm.params, layer.ff
            new = []
            for stream, sees in ((h, lambda i, j: rank[j] <= rank[i]), (g, lambda i, j: rank[j] < rank[i])):
                ys = []
                for i in range(T):
                    vec = np.zeros(C)
                    keys = [j for j in range(T) if sees(i, j)]
                    for n in range(H):
                        q = stream[i] @ p["q"][:, n]
                        scores = []
                        for j in keys:
                            s = (q + p["r_w_bias"][n]) @ (h[j] @ p["k"][:, n])
                            s += (q + p["r_r_bias"][n]) @ (rel(i - j) @ p["r"][:, n])
                            if tt is not None:
                                s += (q + p["r_s_bias"][n]) @ p["seg_embed"][int(tt[b, i] != tt[b, j]), n]
                            scores.append(s / math.sqrt(D))
                        if keys:
                            e = np.exp(np.array(scores) - max(scores))
                            o = sum(w * (h[j] @ p["v"][:, n]) for w, j in zip(e / e.sum(), keys))
                            vec += p["o"][:, n] @ o
                    y = _ln(vec + stream[i], ln_a["weight"], ln_a["bias"], c.eps)
                    f1 = _gelu(ff.layer_1.params["weight"] @ y + ff.layer_1.params["bias"]) if c.activation == "gelu" \
                        else None
                    f2 = ff.layer_2.params["weight"] @ f1 + ff.layer_2.params["bias"]
                    ys.append(_ln(f2 + y, ff.layer_norm.params["weight"], ff.layer_norm.params["bias"], c.eps))
                new.append(ys)
            h, g = new
        for i in range(T):
            out[b, i] = model.lm_loss.params["weight"] @ g[i] + model.lm_loss.params["bias"]
    return out


IDX = np.array([[1, 2, 3, 4, 5, 6], [6, 0, 1, 1, 2, 5]])
ORDER = np.array([[3, 0, 5, 1, 4, 2], [5, 4, 3, 2, 1, 0]])


@pytest.mark.parametrize("segments", [False, True])
def test_forward_matches_a_position_by_position_loop(segments):
    model = tiny_model()
    tt = np.array([[0, 0, 0, 1, 1, 1], [0, 1, 1, 1, 0, 0]]) if segments else None
    _, logits = model(IDX, None, ORDER, tt)
    np.testing.assert_allclose(logits, naive_logits(model, IDX, ORDER, tt), rtol=0, atol=1e-12)


def test_the_query_stream_never_sees_its_own_token_nor_later_ones():
    """Changing the token at position i (or at anything after i in the order) leaves the
    query stream's prediction at i unchanged; changing one earlier in the order changes it."""
    model = tiny_model()
    _, base = model(IDX, None, ORDER)
    order = ORDER[0]
    for r, i in enumerate(order):
        for later in order[r:]:                                      # i itself and what follows it
            other = IDX.copy()
            other[0, later] = (other[0, later] + 1) % 7
            _, logits = model(other, None, ORDER)
            np.testing.assert_array_equal(logits[0, i], base[0, i])
        for earlier in order[:r]:
            other = IDX.copy()
            other[0, earlier] = (other[0, earlier] + 1) % 7
            assert not np.allclose(model(other, None, ORDER)[1][0, i], base[0, i])


def test_the_content_stream_sees_its_own_token():
    model = tiny_model()
    layer = model.layer[0]
    x = model.word_embedding(IDX)
    mask_h, mask_g = model.masks(ORDER, 2, 6)
    assert mask_h[:, np.arange(6), np.arange(6)].all() and not mask_g[:, np.arange(6), np.arange(6)].any()
    from minipt.ops.relative_attention import relative_sinusoid
    r = relative_sinusoid(6, 6, 8, np.float64)
    g = np.zeros_like(x)
    h1, _ = layer(x, g, r, mask_h, mask_g)
    first = ORDER[0, 0]                                              # sees only itself in the content stream
    x2 = x.copy()
    x2[0, first] += 0.5
    h2, _ = layer(x2, g, r, mask_h, mask_g)
    assert not np.allclose(h1[0, first], h2[0, first])
    others = [i for i in range(6) if i != first]
    np.testing.assert_array_equal(h1[1], h2[1])                      # the other sequence is untouched
    assert all(not np.allclose(h1[0, i], h2[0, i]) for i in others)  # first in the order: everyone sees it


def test_left_to_right_is_the_default_order():
    model = tiny_model()
    _, a = model(IDX)
    _, b = model(IDX, None, np.arange(6))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("order, error, says", [
    (np.arange(5), ValueError, r"order: expected shape \(T,\) = \(6,\) or \(B, T\) = \(2, 6\), got \(5,\)"),
    (np.array([0, 1, 2, 3, 4, 4]), ValueError, r"order: row 0 is not a permutation of 0..5: got \[0, 1, 2, 3, 4, 4\]"),
    (np.array([[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 6]]), ValueError, "row 1 is not a permutation"),
    (np.arange(6.0), TypeError, "order: expected integer positions, got dtype float64"),
    (np.arange(12).reshape(2, 6) % 6 * 1, None, None),
])
def test_bad_orders_are_refused_by_name(order, error, says):
    model = tiny_model()
    if error is None:
        model(IDX, None, order)
        return
    with pytest.raises(error, match=says):
        model(IDX, None, order)


def test_bad_segments_and_targets_are_refused():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"token_type_ids: expected integer ids of shape \(2, 6\)"):
        model(IDX, None, None, np.zeros((2, 5), dtype=int))
    with pytest.raises(ValueError, match=r"targets: expected shape \(2, 6\)"):
        model(IDX, IDX[:, :5], None)
    with pytest.raises(ValueError, match="d_model 10 must be even and divisible by n_head 4"):
        XLNetConfig(d_model=10, n_head=4)


def test_a_first_in_order_prediction_uses_w_alone():
    """With every token predicted, the first of the order sees nothing: its logits do not
    depend on the input at all (minipt's zero output for an empty attention row)."""
    model = tiny_model()
    _, a = model(IDX, None, ORDER)
    other = np.array([[5, 5, 5, 0, 5, 5], [1, 1, 1, 1, 1, 1]])
    _, b = model(other, None, ORDER)
    np.testing.assert_array_equal(a[0, ORDER[0, 0]], b[0, ORDER[0, 0]])
    np.testing.assert_array_equal(a[1, ORDER[1, 0]], b[1, ORDER[1, 0]])


def test_the_recipe_trains_a_few_steps(tmp_path):
    entry = registry.get("xlnet")
    report = entry.recipe(entry, steps=4, out_dir=str(tmp_path / "run"), progress=False)
    assert report["steps"] == 4 and np.isfinite(report["val_loss"]) and np.isfinite(report["left_to_right_loss"])
    assert (tmp_path / "run" / "checkpoint.npz").is_file()
    with pytest.raises(FileExistsError, match="already holds a run"):
        entry.recipe(entry, steps=4, out_dir=str(tmp_path / "run"), progress=False)


def test_recipe_batches_predict_the_tail_of_each_order():
    from minipt.recipes.xlnet import PermutedWindows
    data = PermutedWindows(np.arange(100) % 7, np.arange(50) % 7, 8, 3, 4)
    idx, targets, order = data.get_batch("train", np.random.default_rng(0))
    for b in range(3):
        predicted = set(np.nonzero(targets[b] != IGNORE)[0])
        assert predicted == set(order[b, -2:]) and (targets[b][list(predicted)] == idx[b][list(predicted)]).all()
