"""The default toy language's grammar and what is known to be true of it.

An HMM over word categories (see ``hmm_language``): a sentence is a subject noun phrase,
a verb and maybe an object and a place ("the old king sees his gold near the river .").
The tables are small enough to read, and they build in the facts the lessons measure:

- **semantic groups** (animals, men, women, royals, foods, things, money, places), so
  word vectors can be scored by category similarity;
- **analogies by construction**: gender shows in the possessive that follows the verb
  ("the king sees his ...", "the queen sees her ..."), royalty in the verbs only royals
  use ("rules", "reigns"); pairs that differ in one attribute share everything else,
  so man : woman = king : queen is a fact of the data, as in word2vec's analogy test
  (Mikolov et al. 2013);
- **polysemy on purpose**: "bank" is a place by the river and a store of money, "bat"
  an animal and a thing to carry; every sampled token carries its state, hence its
  sense, so a lesson can show static vectors merging the senses and contextual ones
  (ELMo, BERT) separating them;
- **sentiment** carried by adjectives, for the classification task;
- coarse **tags** per state, for the tagging task.
"""
from __future__ import annotations

# the subject's noun state, by its share of subjects
_SUBJECTS = {"animal": 0.44, "man": 0.2, "woman": 0.2, "king": 0.08, "queen": 0.08}
_OBJECTS = {"adj_food": 0.1, "food": 0.3, "adj_thing": 0.1, "thing": 0.3, "money": 0.2}

# state name -> words it may emit (in order of decreasing probability, Zipf 1/rank)
STATES: dict[str, list[str]] = {
    "det_s": ["the", "a", "one", "my", "every"],
    "adj_s": ["old", "small", "big", "happy", "sad", "quick", "kind", "angry", "good", "bad"],
    "animal": ["cat", "dog", "bat", "fox", "bird", "horse"],
    "man": ["man", "boy", "father"],
    "woman": ["woman", "girl", "mother"],
    "king": ["king", "prince"],
    "queen": ["queen", "princess"],
    "verb_t_m": ["sees", "likes", "finds", "wants", "carries", "eats"],
    "verb_t_f": ["sees", "likes", "finds", "wants", "carries", "eats"],
    "verb_t_n": ["sees", "likes", "finds", "wants", "carries", "eats"],
    "verb_i": ["sleeps", "runs", "sings", "waits", "falls"],
    "verb_r": ["rules", "reigns", "speaks"],
    "det_o_m": ["the", "his", "a"],
    "det_o_f": ["the", "her", "a"],
    "det_o_n": ["the", "a", "its"],
    "adj_food": ["fresh", "sweet", "rotten"],
    "food": ["fish", "bread", "apple", "cake", "seed"],
    "adj_thing": ["heavy", "round", "broken"],
    "thing": ["ball", "bat", "stone", "key"],
    "money": ["coin", "bank", "gold"],
    "prep": ["in", "near", "under", "by"],
    "det_p": ["the", "a"],
    "place": ["river", "forest", "bank", "house", "garden", "field", "castle"],
    "stop": ["."],
    "end": ["\n"],
}


def _mix(*parts: tuple[float, dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for weight, dist in parts:
        for k, p in dist.items():
            out[k] = out.get(k, 0.0) + weight * p
    return out


# state -> {next state: probability}
TRANSITIONS: dict[str, dict[str, float]] = {
    "det_s": _mix((0.3, {"adj_s": 1.0}), (0.7, _SUBJECTS)),
    "adj_s": _mix((0.1, {"adj_s": 1.0}), (0.9, _SUBJECTS)),
    "animal": {"verb_t_n": 0.6, "verb_i": 0.4},
    "man": {"verb_t_m": 0.6, "verb_i": 0.4},
    "woman": {"verb_t_f": 0.6, "verb_i": 0.4},
    "king": {"verb_t_m": 0.45, "verb_i": 0.2, "verb_r": 0.35},
    "queen": {"verb_t_f": 0.45, "verb_i": 0.2, "verb_r": 0.35},
    "verb_t_m": {"det_o_m": 1.0},
    "verb_t_f": {"det_o_f": 1.0},
    "verb_t_n": {"det_o_n": 1.0},
    "verb_i": {"prep": 0.5, "stop": 0.5},
    "verb_r": {"prep": 0.6, "stop": 0.4},
    "det_o_m": _OBJECTS, "det_o_f": _OBJECTS, "det_o_n": _OBJECTS,
    "adj_food": {"food": 1.0},
    "adj_thing": {"thing": 1.0},
    "food": {"prep": 0.3, "stop": 0.7},
    "thing": {"prep": 0.3, "stop": 0.7},
    "money": {"prep": 0.3, "stop": 0.7},
    "prep": {"det_p": 1.0},
    "det_p": {"place": 1.0},
    "place": {"stop": 1.0},
    "stop": {"det_s": 0.8, "end": 0.2},
    "end": {"det_s": 1.0},
}
START = "det_s"
END_WORD = "\n"

# state -> tag (the tagging task's labels: the generator's own categories)
TAGS: dict[str, str] = {
    "det_s": "DET", "det_o_m": "DET", "det_o_f": "DET", "det_o_n": "DET", "det_p": "DET",
    "adj_s": "ADJ", "adj_food": "ADJ", "adj_thing": "ADJ",
    "animal": "ANIMAL", "man": "PERSON", "woman": "PERSON", "king": "ROYAL", "queen": "ROYAL",
    "verb_t_m": "VERB", "verb_t_f": "VERB", "verb_t_n": "VERB", "verb_i": "VERB", "verb_r": "VERB",
    "food": "FOOD", "thing": "THING", "money": "MONEY", "place": "PLACE",
    "prep": "PREP", "stop": "PUNCT", "end": "END",
}
SUBJECT_STATES = tuple(_SUBJECTS)
NOUN_STATES = SUBJECT_STATES + ("food", "thing", "money", "place")
ADJECTIVE_STATES = ("adj_s", "adj_food", "adj_thing")

# -- ground truth for word vectors ---------------------------------------------------
# words with two senses: word -> {state: sense}
SENSES: dict[str, dict[str, str]] = {
    "bank": {"place": "bank/river", "money": "bank/money"},
    "bat": {"animal": "bat/animal", "thing": "bat/thing"},
}


def _categories() -> dict[str, list[str]]:
    groups = {"animals": ["animal"], "people": ["man", "woman"], "royals": ["king", "queen"],
              "foods": ["food"], "things": ["thing"], "money": ["money"], "places": ["place"],
              "verbs": ["verb_t_n", "verb_i", "verb_r"], "adjectives": list(ADJECTIVE_STATES)}
    return {name: [w for s in states for w in STATES[s] if w not in SENSES] for name, states in groups.items()}


# semantic category -> its unambiguous words (category-similarity ground truth)
CATEGORIES: dict[str, list[str]] = _categories()

# pairs differing in gender, aligned by rank: man/woman, boy/girl, ..., king/queen, ...
GENDER_PAIRS = list(zip(STATES["man"] + STATES["king"], STATES["woman"] + STATES["queen"]))
# pairs differing in royalty: man/king, woman/queen, boy/prince, girl/princess
ROYAL_PAIRS = list(zip(STATES["man"][:2] + STATES["woman"][:2], STATES["king"] + STATES["queen"]))


def analogies() -> list[tuple[str, str, str, str]]:
    """Every analogy a : b = c : d built into the language (the question: is the word
    nearest to b - a + c equal to d?): two pairs that differ by the same attribute."""
    out = []
    for pairs in (GENDER_PAIRS, ROYAL_PAIRS):
        for a, b in pairs:
            for c, d in pairs:
                if a != c:
                    out.append((a, b, c, d))
    return out


POSITIVE = frozenset({"happy", "kind", "good", "fresh", "sweet"})
NEGATIVE = frozenset({"sad", "angry", "bad", "rotten", "broken"})
