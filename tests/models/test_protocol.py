"""One contract test, parametrised over every registered model (as minbpe's tests run over
every tokenizer): forward shapes, the whole-model gradient check, log_prob against the
summed loss, save/load round trip through the registry, eval-mode determinism, bad input."""
import numpy as np
import pytest

from minipt.core.checkpoint import load_checkpoint, save_checkpoint
from minipt.core.module import eval_mode
from minipt.models import registry
from minipt.models.protocol import IGNORE, check_protocol

ENTRIES = registry.entries()
IDS = [e.name for e in ENTRIES]


def test_the_registry_holds_the_ladder_so_far():
    names = set(IDS)
    assert {"gpt", "gpt1", "gpt3", "llama", "dialogpt", "gpt1-finetune"} <= names
    for e in ENTRIES:
        assert e.paper and e.title and e.objective and e.module.startswith("minipt.models."), e.name


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_meets_the_protocol_and_forward_shapes(entry):
    model, batch = entry.tiny()
    check_protocol(model)
    assert model.has_backward == entry.has_backward
    loss, logits = model(*batch)
    assert np.shape(loss) == () and np.isfinite(float(loss))
    assert logits.ndim >= 2 and logits.dtype == np.float64
    assert model.block_size is None or model.block_size >= 1


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.has_backward], ids=[e.name for e in ENTRIES if e.has_backward])
def test_whole_model_gradient_check(entry):
    for case in entry.all_gradchecks():
        result = case.run()
        assert result.passed, f"{case.name}: {result}"
        kinds = {a.kind for a in result.arrays}
        assert "param" in kinds


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.language_model], ids=[e.name for e in ENTRIES if e.language_model])
def test_log_prob_is_minus_the_summed_loss(entry):
    model, (idx, targets) = entry.tiny()
    with eval_mode(model):
        loss, logits = model(idx, targets)
    n = int(np.sum(targets != IGNORE))
    assert model.log_prob(idx, targets) == pytest.approx(-float(loss) * n, rel=1e-12)
    # and against an independent formula: log-softmax of the logits at the targets
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    keep = targets != IGNORE
    by_hand = sum(logp[b, t, targets[b, t]] for b, t in zip(*np.nonzero(keep)))
    assert model.log_prob(idx, targets) == pytest.approx(by_hand, rel=1e-10)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_save_and_load_round_trip_through_the_spec(entry, tmp_path):
    model, batch = entry.tiny()
    spec = model.spec()
    assert spec["model"] in IDS
    path = save_checkpoint(tmp_path / "ck.npz", model, config=spec)
    ck = load_checkpoint(path)
    again = registry.build(ck.config, rng=np.random.default_rng(123), dtype=np.float64)
    assert type(again) is type(model) and again.spec() == spec
    ck.restore(again)
    with eval_mode(model), eval_mode(again):
        a, b = model(*batch), again(*batch)
    assert float(a[0]) == float(b[0])
    np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_eval_mode_is_deterministic_and_restores_the_mode(entry):
    model, batch = entry.tiny()
    model.train()
    with eval_mode(model):
        first = model(*batch)[1].copy()
        second = model(*batch)[1]
    np.testing.assert_array_equal(first, second)
    assert model.training


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.language_model], ids=[e.name for e in ENTRIES if e.language_model])
def test_bad_token_ids_are_refused_by_name(entry):
    model, (idx, targets) = entry.tiny()
    bad = idx.copy()
    bad[0, 0] = 10_000
    with pytest.raises(IndexError, match="10000"):
        model(bad, targets)


def test_unknown_model_names_the_registered_ones():
    with pytest.raises(ValueError, match="unknown model 'nope'.*gpt"):
        registry.get("nope")
    with pytest.raises(ValueError, match="'model' key"):
        registry.build({"d_model": 8})
