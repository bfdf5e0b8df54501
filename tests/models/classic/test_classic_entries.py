"""The four classic registry entries: tiny models, whole-model gradchecks from the registry,
specs that rebuild the same architecture."""
import numpy as np
import pytest

from minipt.models import registry

NAMES = ["ngram", "nnlm", "word2vec", "glove"]


@pytest.mark.parametrize("name", NAMES)
def test_entry_gradchecks_pass(name):
    entry = registry.get(name)
    cases = entry.all_gradchecks()
    model, _ = entry.tiny()
    assert len(cases) == (0 if not model.has_backward else 4 if name == "word2vec" else 1)
    for case in cases:
        result = case.run()
        assert result.passed, f"{case.name}\n{result}"


@pytest.mark.parametrize("name", NAMES)
def test_spec_rebuilds_the_architecture(name):
    entry = registry.get(name)
    model, _ = entry.tiny()
    again = registry.build(model.spec(), dtype=np.float64)
    assert again.spec() == model.spec()
    assert {k: v.shape for k, v in again.parameters().items()} == {k: v.shape for k, v in model.parameters().items()}
    assert entry.language_model == (name in ("ngram", "nnlm"))
    assert entry.lesson and entry.paper and "toy" in entry.presets and entry.recipe is not None
