"""A second domain of the toy language, for domain- and task-adaptive pre-training.

Gururangan et al. 2020 ("Don't Stop Pretraining") and seed 001's four-stage recipe
(general pre-training -> domain-adaptive -> task-adaptive -> fine-tuning) need text from
a domain whose words are the general language's but used differently. ``court`` is the
toy language with the same grammar and vocabulary, shifted in two ways:

- topics: subjects are mostly kings and queens (0.8 of the general 0.16), objects
  mostly money and things, and the royal verbs ("rules", "reigns") are frequent;
- word frequencies: every state's Zipf order is reversed, so its rarest word in the
  general domain becomes its most frequent ("every" opens more subjects than "the").

The exact oracle of ``HMMLanguage`` holds for both, so the shift is measurable: the
cross-entropy of court text under the general language exceeds its own entropy.
"""
from __future__ import annotations

from functools import lru_cache

from .hmm_language import HMMLanguage
from .toy_grammar import START, STATES, TRANSITIONS, _mix

DOMAINS = ("general", "court")
_COURT_SUBJECTS = {"king": 0.4, "queen": 0.4, "man": 0.05, "woman": 0.05, "animal": 0.1}
_COURT_OBJECTS = {"money": 0.5, "adj_thing": 0.2, "thing": 0.2, "adj_food": 0.05, "food": 0.05}


def _court_transitions() -> dict[str, dict[str, float]]:
    t = {s: dict(d) for s, d in TRANSITIONS.items()}
    t["det_s"] = _mix((0.3, {"adj_s": 1.0}), (0.7, _COURT_SUBJECTS))
    t["adj_s"] = _mix((0.1, {"adj_s": 1.0}), (0.9, _COURT_SUBJECTS))
    for s in ("det_o_m", "det_o_f", "det_o_n"):
        t[s] = dict(_COURT_OBJECTS)
    t["king"] = {"verb_t_m": 0.3, "verb_i": 0.1, "verb_r": 0.6}
    t["queen"] = {"verb_t_f": 0.3, "verb_i": 0.1, "verb_r": 0.6}
    return t


@lru_cache(maxsize=len(DOMAINS))
def domain_language(name: str = "general") -> HMMLanguage:
    """The HMM of a domain: ``general`` (the default toy language) or ``court``."""
    if name == "general":
        return HMMLanguage.build()
    if name == "court":
        return HMMLanguage.build({s: list(reversed(ws)) for s, ws in STATES.items()}, _court_transitions(), START)
    raise ValueError(f"unknown domain {name!r}; choose one of {DOMAINS}")
