"""ELECTRA's report: replaced-token AUC read the right way round, the discriminator loss
equal to the base-rate entropy for a detector that always says the base rate, and the
uniform-generator control's samples (uniform over the vocabulary, not the generator's)."""
import numpy as np
import pytest

from minipt.data.encoder_corpus import encoder_corpus
from minipt.models.encoder.electra import (
    ELECTRA_TINY,
    ElectraConfig,
    ElectraOutput,
    build,
)
from minipt.recipes.electra import detection_metrics, electra_batches, electra_evaluate
from minipt.tasks.metrics import binary_entropy


@pytest.fixture(scope="module")
def corpus():
    return encoder_corpus(n_docs=30, mode="packed", max_length=24, batch_size=8, n_instances={"train": 32, "val": 16})


def small_electra(corpus, **extra):
    return build(rng=np.random.default_rng(0), vocab_size=corpus.vocab_size, max_position=24, n_layer=1, n_head=2,
                 d_model=16, d_ff=32, generator_d_model=8, generator_n_head=1, generator_d_ff=16, **extra)


class Oracle:
    """A stand-in whose scores are +1 on replaced tokens and -1 on originals (or the
    reverse), so the AUC the report reads is known: 1 (or 0)."""
    training = False

    def __init__(self, model, sign):
        self.model, self.sign, self.config = model, sign, model.config

    def eval(self):
        return self

    def train(self, mode=True):
        return self

    def outputs(self, *batch):
        out = self.model.outputs(*batch)
        return out._replace(logits=self.sign * np.where(out.replaced == 1, 1.0, -1.0))


def test_auc_is_read_with_replaced_as_the_positive_class(corpus):
    model = small_electra(corpus)
    model.config.generator_sampling = "uniform"               # replacements that differ from the original
    found = {s: detection_metrics(Oracle(model, s), electra_batches(corpus), 3, np.random.default_rng(1))
             for s in (1, -1)}
    assert found[1]["rtd_auc"] == 1.0 and found[-1]["rtd_auc"] == 0.0
    assert found[1]["rtd_accuracy"] == 1.0 and found[1]["replaced_found"] == 1.0
    assert 0.05 < found[1]["replaced_share"] < 0.3 and ElectraOutput._fields[4] == "logits"


def test_a_detector_saying_the_base_rate_scores_the_base_rate_entropy(corpus):
    model = small_electra(corpus)
    head = model.discriminator_head.dense_prediction.params
    head["weight"][...] = 0.0                                  # z = bias for every token
    first = detection_metrics(model, electra_batches(corpus), 4, np.random.default_rng(2))
    p = first["replaced_share"]
    head["bias"][...] = np.log(p / (1 - p))                    # sigmoid(z) = p
    found = detection_metrics(model, electra_batches(corpus), 4, np.random.default_rng(2))   # the same tokens
    assert found["replaced_share"] == p
    assert found["disc_loss"] == pytest.approx(binary_entropy(p), rel=1e-6)
    assert found["base_rate_entropy"] == pytest.approx(binary_entropy(p), rel=1e-12)
    assert found["rtd_auc"] == 0.5                             # one score for all: ties, chance
    assert found["rtd_accuracy"] == pytest.approx(found["rtd_baseline"])
    lines, metrics = electra_evaluate(model, corpus, np.random.default_rng(2), n_batches=4)
    assert metrics == found and "AUC 0.500" in lines[0] and "sampled from the generator" in lines[0]
    assert f"against {binary_entropy(p):.3f} for the base rate" in lines[1]


def test_uniform_control_ignores_the_generator():
    model = build(rng=np.random.default_rng(0), **{**ELECTRA_TINY, "generator_sampling": "uniform"})
    V = model.config.vocab_size
    logits = np.array([[[30.0] + [-30.0] * (V - 1)]]).repeat(22000, axis=1)     # G all but certain of id 0
    masked = np.ones(logits.shape[:2], dtype=bool)
    masked[0, :2000] = False
    samples = model.sample(logits, masked)[0]
    assert np.all(samples[:2000] == 0)                                            # unmasked: untouched
    freq = np.bincount(samples[2000:], minlength=V) / 20000
    sigma = np.sqrt((1 / V) * (1 - 1 / V) / 20000)
    assert np.all(np.abs(freq - 1 / V) <= 5 * sigma), freq
    mlm = build(rng=np.random.default_rng(0), **ELECTRA_TINY)
    assert np.all(mlm.sample(logits, masked)[0][2000:] == 0)                      # G's samples: its argmax
    with pytest.raises(ValueError, match="generator_sampling must be one of"):
        ElectraConfig(generator_sampling="unigram")

