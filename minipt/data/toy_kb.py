"""A toy knowledge graph, and sentences that mention its entities, with known truth.

Knowledge-enhanced pre-training (ERNIE of Zhang et al. 2019, Tsinghua; ERNIE of Sun et
al. 2019, Baidu) needs text whose entity mentions are linked to a graph of facts. Here
both are generated from one seed, so every mention's entity and every fact is known:

- entities: ``person`` s, ``city`` s and ``country`` s, with made-up names that are not
  words of the toy language ("kamo", "ritun", "veland"); a name is one token, and no
  person or city name shares a syllable with any country's name (countries have
  syllables of their own), so no name spells out its answer;
- relations: ``lives_in`` (person -> city), ``located_in`` (city -> country) and
  ``knows`` (person -> person), stored as (head, relation, tail) id triples;
- sentences: the toy language's frames with entity names in them ("kamo sees the
  fish near ritun ."), each with its mention spans (start, end, entity id);
- the ``country`` task: a sentence mentions one person and says nothing of where they
  live; the label is the country of that person's city, a two-hop fact (lives_in, then
  located_in) that only the graph holds. Persons are split between train and test, so
  a model cannot learn person -> country from the fine-tuning labels: it must bring the
  fact from pre-training or from the graph.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.checks import check_positive_int
from .toy_grammar import STATES

RELATIONS = ("lives_in", "located_in", "knows")
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_SUFFIX = {"person": "", "city": "n", "country": "land"}


@dataclass(frozen=True)
class KnowledgeBase:
    """Entities (names, types) and facts as an (N, 3) array of (head, relation, tail) ids."""
    names: tuple[str, ...]
    types: tuple[str, ...]
    triples: np.ndarray                     # (N, 3) int64
    relations: tuple[str, ...] = RELATIONS

    @property
    def n_entities(self) -> int:
        return len(self.names)

    def ids(self, kind: str) -> np.ndarray:
        """The ids of every entity of type ``kind``."""
        if kind not in _SUFFIX:
            raise ValueError(f"entity type must be one of {sorted(_SUFFIX)}, got {kind!r}")
        return np.array([i for i, t in enumerate(self.types) if t == kind], np.int64)

    def tail(self, head: int, relation: str) -> int:
        """The one tail of a functional relation (lives_in, located_in)."""
        self.check_entities([head])
        r = self.relations.index(relation)
        rows = self.triples[(self.triples[:, 0] == head) & (self.triples[:, 1] == r)]
        if len(rows) != 1:
            raise ValueError(f"{self.names[head]!r} has {len(rows)} {relation} facts; expected exactly one")
        return int(rows[0, 2])

    def country_of(self, person: int) -> int:
        """The two-hop fact: the country of the city the person lives in."""
        return self.tail(self.tail(person, "lives_in"), "located_in")

    def check_entities(self, ids) -> np.ndarray:
        """``ids`` as an int64 array, or a ValueError naming the first id outside the graph."""
        ids = np.asarray(ids)
        if ids.size and (not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0 or ids.max() >= self.n_entities):
            bad = ids.ravel()[(ids.ravel() < 0) | (ids.ravel() >= self.n_entities)]
            raise ValueError(f"entity ids must be integers in [0, {self.n_entities}); got {bad[:5].tolist()} "
                             f"(dtype {ids.dtype})")
        return ids.astype(np.int64)


_SYLLABLES = tuple(c + v for c in _CONSONANTS for v in _VOWELS)    # 70 consonant-vowel pairs


def _names(kind: str, n: int, rng: np.random.Generator, taken: set[str], syllables) -> list[str]:
    """n new pronounceable names (two of ``syllables`` + a suffix per type), none in ``taken``."""
    out = []
    while len(out) < n:
        name = "".join(syllables[i] for i in rng.integers(0, len(syllables), 2)) + _SUFFIX[kind]
        if name not in taken:
            taken.add(name)
            out.append(name)
    return out


def syllables(name: str) -> set[str]:
    """The consonant-vowel pairs a name is made of (its type suffix dropped)."""
    for suffix in ("land", "n"):
        if name.endswith(suffix) and len(name) % 2 == len(suffix) % 2:
            name = name[:-len(suffix)]
            break
    return {name[i:i + 2] for i in range(0, len(name) - 1, 2)}


def build_kb(n_persons: int = 24, n_cities: int = 8, n_countries: int = 4, n_knows: int = 2,
             seed: int = 0) -> KnowledgeBase:
    """A seeded graph: each person lives in one city, each city lies in one country
    (every country gets at least one city, every city at least one person), and each
    person knows ``n_knows`` others."""
    for name, value in (("n_persons", n_persons), ("n_cities", n_cities), ("n_countries", n_countries)):
        check_positive_int(name, value)
    if not n_countries <= n_cities <= n_persons:
        raise ValueError(f"need n_countries <= n_cities <= n_persons, got {n_countries}, {n_cities}, {n_persons}")
    if not 0 <= n_knows < n_persons:
        raise ValueError(f"n_knows must be in [0, n_persons), got {n_knows}")
    rng = np.random.default_rng(seed)
    if 2 * n_countries > len(_SYLLABLES) // 2 or n_persons + n_cities > (len(_SYLLABLES) // 2) ** 2:
        raise ValueError(f"too many entities for the name generator: {n_persons} persons, {n_cities} cities, "
                         f"{n_countries} countries")
    taken = {w for words in STATES.values() for w in words}
    own = rng.permutation(len(_SYLLABLES))            # countries draw from one half, the rest from the other
    country_syllables = [_SYLLABLES[i] for i in own[:len(_SYLLABLES) // 2]]
    other_syllables = [_SYLLABLES[i] for i in own[len(_SYLLABLES) // 2:]]
    countries_named = _names("country", n_countries, rng, taken, country_syllables)
    names = _names("person", n_persons, rng, taken, other_syllables) \
        + _names("city", n_cities, rng, taken, other_syllables) + countries_named
    types = ["person"] * n_persons + ["city"] * n_cities + ["country"] * n_countries
    persons = np.arange(n_persons)
    cities = n_persons + np.arange(n_cities)
    countries = n_persons + n_cities + np.arange(n_countries)

    def cover(n_items: int, n_bins: int) -> np.ndarray:       # every bin used at least once
        return rng.permutation(np.concatenate([np.arange(n_bins), rng.integers(0, n_bins, n_items - n_bins)]))

    triples = [(p, 0, cities[c]) for p, c in zip(persons, cover(n_persons, n_cities))]
    triples += [(c, 1, countries[k]) for c, k in zip(cities, cover(n_cities, n_countries))]
    for p in persons:
        others = rng.choice(np.delete(persons, p), size=n_knows, replace=False)
        triples += [(p, 2, int(q)) for q in others]
    return KnowledgeBase(tuple(names), tuple(types), np.array(triples, np.int64))


@dataclass(frozen=True)
class Mention:
    """A sentence's words and its entity mentions as (start, end, entity id), end exclusive."""
    words: tuple[str, ...]
    spans: tuple[tuple[int, int, int], ...]


def _pick(rng: np.random.Generator, state: str) -> str:
    return str(rng.choice(STATES[state]))


def fact_sentence(kb: KnowledgeBase, triple, rng: np.random.Generator) -> Mention:
    """A sentence that states one fact: "kamo lives in ritun .", "ritun lies in veland .",
    "kamo knows tibe ."."""
    h, r, t = (int(v) for v in triple)
    verb = {"lives_in": ["lives", "in"], "located_in": ["lies", "in"], "knows": ["knows"]}[kb.relations[r]]
    words = [kb.names[h], *verb, kb.names[t], "."]
    return Mention(tuple(words), ((0, 1, h), (len(words) - 2, len(words) - 1, t)))


def plain_sentence(kb: KnowledgeBase, person: int, rng: np.random.Generator, place: int | None = None) -> Mention:
    """A toy-language frame with a person as subject and, optionally, a city as the
    place ("kamo carries the heavy stone near ritun ."): mentions, but no fact stated."""
    kb.check_entities([person] + ([] if place is None else [place]))
    words = [kb.names[person], _pick(rng, "verb_t_n"), _pick(rng, "det_o_n"), _pick(rng, "thing")]
    spans = [(0, 1, person)]
    if place is not None:
        words += [_pick(rng, "prep"), kb.names[place]]
        spans.append((len(words) - 1, len(words), place))
    return Mention(tuple(words + ["."]), tuple(spans))


def corpus(kb: KnowledgeBase, n_sentences: int, seed: int = 0, p_fact: float = 0.5) -> list[Mention]:
    """Pre-training text: a share ``p_fact`` of sentences state a random fact of the
    graph, the rest are plain frames mentioning a person (and sometimes a city)."""
    check_positive_int("n_sentences", n_sentences)
    rng = np.random.default_rng(seed)
    persons, cities = kb.ids("person"), kb.ids("city")
    out = []
    for _ in range(n_sentences):
        if rng.random() < p_fact:
            out.append(fact_sentence(kb, kb.triples[rng.integers(len(kb.triples))], rng))
        else:
            place = int(rng.choice(cities)) if rng.random() < 0.5 else None
            out.append(plain_sentence(kb, int(rng.choice(persons)), rng, place))
    return out


def country_task(kb: KnowledgeBase, n_per_person: int = 4, test_share: float = 0.25,
                 seed: int = 0) -> dict[str, list[tuple[Mention, int]]]:
    """{"train", "test"}: (sentence mentioning one person and no place, country label
    0..n_countries-1). Test persons never occur in train; they are drawn per country
    (about ``test_share`` of each country's persons, at least one where a country has
    two or more), so every country is asked about in both splits where it can be."""
    check_positive_int("n_per_person", n_per_person)
    rng = np.random.default_rng(seed)
    first_country = int(kb.ids("country")[0])
    test, train = [], []
    for k in kb.ids("country"):
        group = rng.permutation([p for p in kb.ids("person") if kb.country_of(int(p)) == k])
        n_test = min(len(group) - 1, max(1, int(round(test_share * len(group))))) if len(group) > 1 else 0
        test += list(group[:n_test])
        train += list(group[n_test:])
    return {name: [(plain_sentence(kb, int(p), rng), kb.country_of(int(p)) - first_country)
                   for p in group for _ in range(n_per_person)]
            for name, group in (("train", train), ("test", test))}
