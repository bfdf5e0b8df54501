"""GLM: forward values against a plain loop with both position tables, Part A blind to
Part B and Part B left to right (information flow), blank filling step by step, bad
input (more blanks than fit, wrong positions) refused by name."""
import sys
from pathlib import Path

import numpy as np
import pytest

from minipt.models import registry
from minipt.models.unified.glm import END, MASK, START, tiny_batch, tiny_model
from minipt.objectives.permutation import glm_blank_infilling

sys.path.insert(0, str(Path(__file__).parent))
from unified_reference import block, block_params, gelu  # noqa: E402


def naive_logits(model, ids, pos, sees):
    c, P = model.config, dict(model.named_parameters())
    out = np.zeros(ids.shape + (c.vocab_size,))
    for b in range(ids.shape[0]):
        xs = [P["word_embeddings.weight"][ids[b, t]] + P["position_embeddings.weight"][pos[b, 0, t]]
              + P["block_position_embeddings.weight"][pos[b, 1, t]] for t in range(ids.shape[1])]
        for layer in range(c.n_layer):
            xs = block(xs, block_params(model, f"stack.blocks.{layer}."), lambda i, j: sees(b, i, j), c.n_head,
                       c.eps, prenorm=False, act=gelu)
        for t, h in enumerate(xs):
            out[b, t] = P["word_embeddings.weight"] @ h
    return out


def example():
    ex = glm_blank_infilling(np.arange(4, 12), np.random.default_rng(3), mask_id=MASK, start_id=START, end_id=END,
                             ratio=0.3)
    return ex["ids"][None], ex["positions"][None], ex["mask"], ex["n_a"]


def test_forward_matches_a_position_by_position_loop():
    model = tiny_model()
    ids, pos, mask, targets = tiny_batch()
    n = [int(mask[b].any(axis=0).sum()) for b in range(2)]               # real tokens per row
    n_a = [int(mask[b, 0].sum()) for b in range(2)]                       # what the first token sees: Part A
    sees = lambda b, i, j: i < n[b] and j < n[b] and (j < n_a[b] or (i >= n_a[b] and j <= i))   # padding: nothing
    _, logits = model(ids, pos, mask, targets)
    np.testing.assert_allclose(logits, naive_logits(model, ids, pos, sees), rtol=0, atol=1e-12)


def test_part_a_never_sees_part_b_and_part_b_reads_left_to_right():
    model = tiny_model()
    ids, pos, mask, n_a = example()
    N = ids.shape[1]
    assert n_a < N - 1
    _, base = model(ids, pos, mask)
    for j in range(N):
        other = ids.copy()
        other[0, j] = 11 if ids[0, j] != 11 else 10
        changed = np.abs(model(other, pos, mask)[1] - base).max(-1)[0] > 1e-9
        want = [j < n_a or (i >= n_a and j <= i) for i in range(N)]
        np.testing.assert_array_equal(changed, want, err_msg=f"token {j}")


def test_both_position_ids_enter():
    model = tiny_model()
    ids, pos, mask, n_a = example()
    _, base = model(ids, pos, mask)
    for row in (0, 1):
        moved = pos.copy()
        moved[0, row, -1] += 1
        assert np.abs(model(ids, moved, mask)[1] - base)[0, -1].max() > 1e-6


def test_blank_filling_is_greedy_decoding_of_part_b():
    model = tiny_model(seed=5)
    part_a = np.array([4, MASK, 7, 8, MASK, 11])
    spans = model.fill(part_a, mask_id=MASK, start_id=START, end_id=END, max_span=3)
    # by hand: each blank, left to right, a [START] at (its [MASK]'s position, 1), then
    # each token at (that position, k); Part A sees Part A, Part B sees A and B up to itself
    ids, pos, by_hand = list(part_a), [list(range(6)), [0] * 6], []
    for blank in (1, 4):
        ids.append(START)
        pos[0].append(blank)
        pos[1].append(1)
        got = []
        for k in range(4):
            N = len(ids)
            mask = np.zeros((N, N), dtype=bool)
            mask[:, :6] = True
            mask[6:, 6:] = np.tril(np.ones((N - 6, N - 6), dtype=bool))
            tok = int(model(np.array([ids]), np.array([pos]), mask)[1][0, -1].argmax())
            if tok == END or k == 3:
                break
            got.append(tok)
            ids.append(tok)
            pos[0].append(blank)
            pos[1].append(k + 2)
        by_hand.append(got)
    assert spans == by_hand and len(set(spans[0])) > 1


def test_the_input_gradcheck_is_registered():
    assert [c.name for c in registry.get("glm").all_gradchecks()] == ["model GLM", "GLM from embeddings"]


def test_bad_input_is_refused_by_name():
    model = tiny_model()
    ids, pos, mask, targets = tiny_batch()
    with pytest.raises(ValueError, match="3 blanks of up to 4 tokens do not fit"):
        model.fill(np.array([4, MASK, 5, MASK, 6, MASK]), mask_id=MASK, start_id=START, end_id=END, max_span=4)
    with pytest.raises(ValueError, match="17 tokens; the context is max_position 16"):
        model(np.full((1, 17), 4), np.zeros((1, 2, 17), dtype=np.int64), np.ones((17, 17), dtype=bool))
    with pytest.raises(ValueError, match="no blank"):
        model.fill(np.array([4, 5]), mask_id=MASK, start_id=START, end_id=END, max_span=2)
    with pytest.raises(ValueError, match="positions: expected shape"):
        model(ids, pos[:, :1], mask, targets)
    with pytest.raises(IndexError, match="positions"):
        model(ids, pos + 16, mask, targets)
    with pytest.raises(ValueError, match="mask: expected shape"):
        model(ids, pos, mask[:, 1:], targets)
