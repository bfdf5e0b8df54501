"""The three unified models train in float32: a step on the recipes' batches keeps the
logits, the loss and every gradient in float32 (NumPy 2 promotion would silently upcast)."""
import numpy as np
import pytest

from minipt.models import registry
from minipt.recipes import unified as R


def batch(name, rng):
    if name == "unilm":
        return R.unilm_batch(R.reply_pairs(20, 0), rng, 4, 0.3)
    if name == "glm":
        return R.glm_batch([R.ids(s) for s in R.toy_sentences(20, 0)], rng, 4, 0.15)
    return R.prefix_batch(R.word_stream(300, 0), rng, 4, 12)


@pytest.mark.parametrize("name", ["unilm", "prefixlm", "glm"])
def test_a_float32_step_stays_float32(name):
    entry = registry.get(name)
    settings = {"unilm": dict(max_position=32, dropout=0.1), "glm": dict(max_position=32),
                "prefixlm": dict(block_size=16)}[name]
    model = entry.build(rng=np.random.default_rng(0), vocab_size=R.tokenizer().vocab_size, n_layer=1, n_head=2,
                        d_model=8, **settings)
    loss, logits = model(*batch(name, np.random.default_rng(1)))
    model.backward()
    assert logits.dtype == np.float32 and np.asarray(loss).dtype == np.float32
    assert all(g.dtype == np.float32 for _, g in model.named_grads())
    assert np.isfinite(float(loss)) and any(np.abs(g).sum() > 0 for _, g in model.named_grads())
