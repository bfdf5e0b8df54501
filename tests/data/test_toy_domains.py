"""The court domain: same vocabulary and grammar, royal topics and reversed word
frequencies, a measurable shift under the exact oracle, and its own sentiment task."""
import numpy as np
import pytest

from minipt.data.toy_domains import domain_language
from minipt.data.toy_tasks import sentiment


def test_court_shifts_topics_and_frequencies():
    gen, court = domain_language("general"), domain_language("court")
    assert gen.vocab == court.vocab
    rng = np.random.default_rng(0)
    words_g, states_g = gen.sample(20000, rng)
    words_c, states_c = court.sample(20000, rng)
    royal = lambda states: np.mean([s in ("king", "queen") for s in states])
    assert royal(states_c) > 4 * royal(states_g)
    assert words_g.count("the") > words_g.count("every") and words_c.count("every") > words_c.count("the")
    text_c = court.render(words_c[:3000])
    own, other = court.nats_per_char(text_c), gen.nats_per_char(text_c)
    assert other > own + 0.05, (own, other)


def test_domain_sentiment_task_and_unknown_domain():
    data = sentiment((50, 10, 10), seed=1, lang=domain_language("court"))
    assert {e["label"] for e in data.train} == {0, 1}
    text = " ".join(e["text"] for e in data.train)
    assert text.count("king") + text.count("queen") > text.count("man ")
    with pytest.raises(ValueError, match="unknown domain"):
        domain_language("sea")
