"""The toy knowledge graph: the facts it promises, mention spans that point at the
named entities, a country task whose labels follow the two hops and whose test persons
never appear in train, and bad input."""
import numpy as np
import pytest

from minipt.data.toy_grammar import STATES
from minipt.data.toy_kb import build_kb, corpus, country_task


def test_graph_is_functional_covering_and_seeded():
    kb = build_kb(n_persons=20, n_cities=6, n_countries=3, seed=4)
    assert kb.triples.shape == (20 + 6 + 2 * 20, 3)
    assert len(set(kb.names)) == kb.n_entities
    assert not set(kb.names) & {w for ws in STATES.values() for w in ws}
    lives = {kb.tail(int(p), "lives_in") for p in kb.ids("person")}
    assert lives == set(kb.ids("city").tolist())                  # every city has someone
    assert {kb.tail(int(c), "located_in") for c in kb.ids("city")} == set(kb.ids("country").tolist())
    for h, r, t in kb.triples:                                    # types follow the relation
        want = {"lives_in": ("person", "city"), "located_in": ("city", "country"), "knows": ("person", "person")}
        assert (kb.types[h], kb.types[t]) == want[kb.relations[r]]
        assert h != t
    again = build_kb(n_persons=20, n_cities=6, n_countries=3, seed=4)
    assert again.names == kb.names and np.array_equal(again.triples, kb.triples)
    assert not np.array_equal(build_kb(seed=4).triples, build_kb(seed=5).triples)


def test_mentions_point_at_their_entities():
    kb = build_kb()
    sents = corpus(kb, 200, seed=1)
    n_facts = 0
    for s in sents:
        for start, end, e in s.spans:
            assert s.words[start:end] == (kb.names[e],)
        n_facts += s.words[1] in ("lives", "lies", "knows")
    assert 60 < n_facts < 140                                     # p_fact 0.5


def test_country_task_follows_two_hops_and_holds_persons_out():
    kb = build_kb()
    task = country_task(kb, n_per_person=3, seed=2)
    first = kb.ids("country")[0]
    persons = {}
    for split, rows in task.items():
        for sent, label in rows:
            (start, end, p), = sent.spans                          # one mention: a person
            assert kb.types[p] == "person" and "in" not in sent.words
            city = kb.tail(p, "lives_in")
            assert label == kb.tail(city, "located_in") - first
            persons.setdefault(split, set()).add(p)
    assert not persons["train"] & persons["test"]
    assert len(task["test"]) == 3 * len(persons["test"])
    first = kb.ids("country")[0]
    sizes = np.bincount([kb.country_of(int(p)) - first for p in kb.ids("person")])
    for split, least in (("train", 1), ("test", 2)):   # a country with two persons is in both splits
        assert {label for _, label in task[split]} == set(np.flatnonzero(sizes >= least).tolist())


def test_bad_input_is_refused_by_name():
    kb = build_kb()
    with pytest.raises(ValueError, match=r"entity ids must be integers in \[0, 36\)"):
        kb.check_entities([0, 36])
    with pytest.raises(ValueError, match="entity type"):
        kb.ids("river")
    with pytest.raises(ValueError, match="n_countries <= n_cities"):
        build_kb(n_cities=2, n_countries=3)
    with pytest.raises(ValueError, match="expected exactly one"):
        kb.tail(int(kb.ids("person")[0]), "knows")
