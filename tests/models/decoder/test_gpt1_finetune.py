"""GPT-1 fine-tuning: the paper's input transformations, the heads and the auxiliary LM loss."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.data import toy_tasks as T
from minipt.data.toy_words import word_tokenizer
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.models.decoder.gpt1_finetune import GPT1Finetune
from minipt.tasks.gpt1_inputs import make_batch, transform

TOK = word_tokenizer()
KINDS = {"classification": (T.sentiment, "classify", 2), "entailment": (T.entailment, "classify", 2),
         "similarity": (T.similarity, "classify", 2), "multiple_choice": (T.multiple_choice, "choice", 4)}


def model(mode, n_classes, lm_weight, block_size=48, dtype=np.float64):
    cfg = GPTConfig.gpt1(vocab_size=TOK.vocab_size, block_size=block_size, n_layer=2, n_head=2, d_model=8, dropout=0.1)
    gpt = GPT(cfg, rng=np.random.default_rng(0)).to(dtype)
    m = GPT1Finetune(gpt, n_classes=n_classes, mode=mode, lm_weight=lm_weight, rng=np.random.default_rng(1)).to(dtype)
    r = np.random.default_rng(2)
    for _, p in m.named_parameters():          # larger weights: non-trivial attention and head
        p[...] += r.standard_normal(p.shape) * 0.3
    return m


def test_transformations_follow_the_paper():
    ids = lambda s: TOK.encode(s)
    s, d, e = (TOK.token_to_id(t) for t in ("<s>", "<$>", "<e>"))
    assert transform("classification", {"text": "the cat runs ."}, TOK) == [[s] + ids("the cat runs .") + [e]]
    assert transform("entailment", {"premise": "a dog runs .", "hypothesis": "a dog ."}, TOK) == \
        [[s] + ids("a dog runs .") + [d] + ids("a dog .") + [e]]
    a, b = ids("a dog runs ."), ids("the cat sleeps .")
    assert transform("similarity", {"a": "a dog runs .", "b": "the cat sleeps ."}, TOK) == \
        [[s] + a + [d] + b + [e], [s] + b + [d] + a + [e]]
    got = transform("multiple_choice", {"context": "the king sees", "choices": ["his gold .", "."]}, TOK)
    assert got == [[s] + ids("the king sees") + [d] + ids(c) + [e] for c in ("his gold .", ".")]


def test_batch_padding_extract_and_lm_targets():
    examples = T.sentiment((6, 0, 0), seed=0).train
    batch = make_batch("classification", examples, TOK, block_size=48)
    B, K, L = batch.idx.shape
    assert (B, K) == (6, 1) and batch.labels.tolist() == [x["label"] for x in examples]
    for b in range(B):
        n = batch.extract[b, 0] + 1
        assert batch.idx[b, 0, n - 1] == TOK.token_to_id("<e>") and (batch.idx[b, 0, n:] == 0).all()
        assert (batch.lm_targets[b, 0, :n - 1] == batch.idx[b, 0, 1:n]).all() and (batch.lm_targets[b, 0, n - 1:] == -100).all()


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("lm_weight", [0.0, 0.5])
def test_whole_model_gradcheck_with_heads_and_aux_loss(kind, lm_weight):
    make, mode, n = KINDS[kind]
    batch = make_batch(kind, make((3, 0, 0), seed=0).train, TOK, block_size=48)
    m = model(mode, 2 if mode == "classify" else 1, lm_weight)
    res = check_module(m, *batch.as_tuple(), select=lambda out: out[0], max_checks=10)
    if mode == "choice" and lm_weight == 0:
        # Softmax across answers ignores what adds the same to every score: the last
        # post-LN bias shifts every h by one vector, so its true gradient is exactly 0
        # (the finite difference sees only round-off, ~1e-13), checked as such here.
        zero = "gpt.h.blocks.1.ln_2.bias"
        m.zero_grad()
        m(*batch.as_tuple())
        m.backward()
        assert np.abs(dict(m.named_grads())[zero]).max() < 1e-15
        assert all(a.max_rel_error < res.tol for a in res.arrays if a.name != zero), res.worst
    else:
        assert res.passed, res.worst


def test_aux_loss_adds_lambda_times_the_lm_loss():
    batch = make_batch("entailment", T.entailment((4, 0, 0), seed=0).train, TOK, block_size=48)
    with_lm, without = model("classify", 2, 0.5).eval(), model("classify", 2, 0.0).eval()
    loss_task, _ = without(*batch.as_tuple())
    loss_all, _ = with_lm(*batch.as_tuple())
    B, K, L = batch.idx.shape
    lm_loss, _ = with_lm.gpt(batch.idx.reshape(B * K, L), batch.lm_targets.reshape(B * K, L))
    assert loss_all == pytest.approx(loss_task + 0.5 * lm_loss, rel=1e-12)


def test_choice_scores_are_per_answer_and_order_equivariant():
    ex = T.multiple_choice((2, 0, 0), seed=0).train
    m = model("choice", 1, 0.0).eval()
    batch = make_batch("multiple_choice", ex, TOK, block_size=48)
    _, logits = m(*batch.as_tuple())
    flipped = [{**e, "choices": e["choices"][::-1], "label": 3 - e["label"]} for e in ex]
    _, logits_flipped = m(*make_batch("multiple_choice", flipped, TOK, block_size=48).as_tuple())
    assert logits.shape == (2, 4) and np.allclose(logits, logits_flipped[:, ::-1])


def test_similarity_is_symmetric_in_its_inputs():
    ex = T.similarity((3, 0, 0), seed=0).train
    m = model("classify", 2, 0.0).eval()
    swapped = [{**e, "a": e["b"], "b": e["a"]} for e in ex]
    _, a = m(*make_batch("similarity", ex, TOK, 48).as_tuple())
    _, b = m(*make_batch("similarity", swapped, TOK, 48).as_tuple())
    assert np.allclose(a, b)


def test_bad_input():
    with pytest.raises(ValueError, match="unknown task kind"):
        transform("translation", {}, TOK)
    with pytest.raises(ValueError, match="context is 8"):
        make_batch("classification", T.sentiment((2, 0, 0)).train, TOK, block_size=8)
    with pytest.raises(ValueError, match="mode"):
        model("regress", 1, 0.5)
    m = model("classify", 2, 0.5)
    with pytest.raises(ValueError, match="extract"):
        m(np.zeros((2, 1, 5), dtype=np.int64), np.full((2, 1), 5))
    with pytest.raises(RuntimeError, match="labels"):
        m(np.zeros((2, 1, 5), dtype=np.int64), np.full((2, 1), 4))
        m.backward()
