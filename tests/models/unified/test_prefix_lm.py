"""Prefix LM: the mask against its definition, forward values against a plain loop, the
information flow it allows, cached decoding equal to re-reading, bad prefixes refused."""
import sys
from pathlib import Path

import numpy as np
import pytest

from minipt.models import registry
from minipt.models.unified.prefix_lm import prefix_mask, tiny_model, tiny_prefix_batch

sys.path.insert(0, str(Path(__file__).parent))
from unified_reference import block, block_params, gelu_tanh, ln  # noqa: E402


def test_the_mask_is_its_definition():
    m = prefix_mask(np.array([3, 0]), 2, 5)
    for b, p in enumerate((3, 0)):
        want = [[j < p or j <= i for j in range(5)] for i in range(5)]
        np.testing.assert_array_equal(m[b], want)
    # queries at positions 4..5 of a cached sequence see the same rows of the full mask
    np.testing.assert_array_equal(prefix_mask(3, 1, 2, start=4)[0], prefix_mask(3, 1, 6)[0, 4:])


def naive_logits(model, idx, prefix_len):
    """GPT-2's equations one position at a time under j < p or j <= i."""
    c, P = model.config, dict(model.named_parameters())
    out = np.zeros(idx.shape + (c.vocab_size,))
    for b in range(idx.shape[0]):
        xs = [P["wte.weight"][idx[b, t]] + P["wpe.weight"][t] for t in range(idx.shape[1])]
        for layer in range(c.n_layer):
            xs = block(xs, block_params(model, f"h.blocks.{layer}."), lambda i, j: j < prefix_len[b] or j <= i,
                       c.n_head, c.eps, prenorm=True, act=gelu_tanh)
        for t, h in enumerate(xs):
            out[b, t] = P["wte.weight"] @ ln(h, P["h.ln_f.weight"], P["h.ln_f.bias"], c.eps)
    return out


def test_forward_matches_a_position_by_position_loop():
    model = tiny_model()
    idx, targets, prefix_len = tiny_prefix_batch()
    _, logits = model(idx, targets, prefix_len)
    np.testing.assert_allclose(logits, naive_logits(model, idx, prefix_len), rtol=0, atol=1e-12)


def test_the_prefix_is_read_both_ways_and_the_rest_left_to_right():
    model, idx, p = tiny_model(), np.array([[1, 2, 3, 4, 5, 6]]), 3
    _, base = model(idx, None, p)
    for j in range(6):
        other = idx.copy()
        other[0, j] = 0
        changed = np.abs(model(other, None, p)[1] - base).max(-1)[0] > 1e-9
        np.testing.assert_array_equal(changed, [j < p or j <= i for i in range(6)], err_msg=f"token {j}")


def test_prefix_zero_is_the_causal_gpt():
    model = tiny_model()
    idx, targets, _ = tiny_prefix_batch()
    gpt_like = model(idx, targets)[1]
    prefix_changes = model(idx, targets, 3)[1]
    np.testing.assert_allclose(gpt_like, naive_logits(model, idx, [0, 0]), atol=1e-12)
    assert np.abs(prefix_changes - gpt_like)[:, :2].max() > 1e-6      # the prefix rows now see ahead


def test_cached_decoding_equals_rereading():
    model = tiny_model()
    idx = np.array([[1, 2, 3, 4, 5, 6]])
    full = model(idx, None, 3)[1]
    cache = model.new_cache()
    first = model(idx[:, :3], None, 3, cache=cache)[1]                  # the prompt, as the prefix
    rest = [model(idx[:, t:t + 1], None, 3, cache=cache)[1] for t in range(3, 6)]
    np.testing.assert_allclose(np.concatenate([first, *rest], axis=1), full, atol=1e-12)


def test_the_gradcheck_with_prefixes_is_registered():
    assert [c.name for c in registry.get("prefixlm").all_gradchecks()] == ["model Prefix LM", "Prefix LM with prefixes"]


def test_bad_prefixes_are_refused_by_name():
    model = tiny_model()
    idx, targets, _ = tiny_prefix_batch()
    with pytest.raises(ValueError, match=r"prefix_len \[7, 7\] is longer than the sequence of 6 tokens"):
        model(idx, targets, 7)
    with pytest.raises(ValueError, match="prefix_len"):
        model(idx, targets, np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="prefix_len"):
        model(idx, targets, -1)
