"""GLM's autoregressive blank infilling against BERT-style independent filling of the same
blanks by the same network at equal steps (Du et al. 2022, "GLM: General Language Model
Pretraining with Autoregressive Blank Infilling", Sec. 2.1 and 2.3: BERT "fails to
capture the interdependencies of masked tokens" and must be told how many tokens a
blank holds; GLM generates each span token by token and decides its length itself).

One GLM shape (2 layers, d 64, post-LN, tied output layer) is built twice from the same
initialisation and trained on the same toy sentences with the same spans (lengths
~ Poisson(3), about 15 % of each sentence), batch, steps and schedule:

- **GLM**: Part A holds one [MASK] per span, Part B generates the spans in a random
  order, each [START] s_1 .. s_l -> s_1 .. s_l [END] (2-D positions, GLM's mask);
- **BERT-style**: every removed token has its own [MASK] in the text (so the model is
  told each span's length), the whole text is read bidirectionally, and each masked
  token is predicted from the top layer independently of the others (the second
  position id 0 everywhere; the same network, embeddings and output layer).

Equal compute: the same sentences and spans per step, the same steps; GLM's rows are
longer by two tokens per span ([START] and the span's own tokens read in Part B).

Measured on held-out sentences blanked the same way for both arms: **fill accuracy**,
the share of sentences that, with their blanks filled greedily, the toy language can
say (its oracle gives them probability > 0); beside it the share restoring exactly the
removed words. Floor: **random words** of the language, as many as were removed.
"""
from __future__ import annotations

import numpy as np

from ..core.module import eval_mode
from ..data.toy_grammar import END_WORD
from ..data.toy_tasks import language
from ..models import registry
from ..objectives.common import IGNORE
from ..objectives.permutation import blank_lengths, glm_blank_infilling
from ..objectives.spans import place_spans
from ..recipes import unified as R
from ..train import TrainConfig, train

BUDGETS = {"tiny": dict(sentences=60, steps=4, held_out=20),
           "quick": dict(sentences=2000, steps=300, held_out=300),
           "full": dict(sentences=4000, steps=1200, held_out=1000)}
ARMS = ("GLM", "BERT-style")
RATIO, BATCH = 0.15, 32
SETTINGS = dict(lr=2e-3, min_lr=2e-4, weight_decay=0.01, grad_clip=1.0, eval_every=0)


def bert_style(ids, rng: np.random.Generator, *, mask_id: int, ratio: float = RATIO) -> dict:
    """ids (T,) -> dict(ids, positions (2, T), targets, mask (T, T)): GLM's spans, each of
    its tokens replaced by a [MASK] of its own and predicted there (IGNORE elsewhere)."""
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    lengths = blank_lengths(T, rng, ratio)
    hidden = np.zeros(T, dtype=bool)
    for s, n in zip(place_spans(lengths, T, rng, min_gap=1), lengths):
        hidden[s:s + n] = True
    return {"ids": np.where(hidden, mask_id, ids), "positions": np.stack([np.arange(T), np.zeros(T, np.int64)]),
            "targets": np.where(hidden, ids, IGNORE), "mask": np.ones((T, T), dtype=bool)}


def batches(sentences, arm: str):
    """``get_batch(split, rng)`` -> (ids, positions, mask, targets) for the arm's objective."""
    sp = R.special_ids()

    def get(split, rng):
        rows = [sentences[k] for k in rng.integers(0, len(sentences), BATCH)]
        if arm == "GLM":
            made = [glm_blank_infilling(r, rng, ratio=RATIO, **sp) for r in rows]
        else:
            made = [bert_style(r, rng, mask_id=sp["mask_id"]) for r in rows]
        return tuple(R.pad_batch(made, ("ids", "positions", "mask", "targets")))
    return get


def bert_fill(model, part_a, lengths, mask_id: int) -> list[list[int]]:
    """Each blank of ``part_a`` (one [MASK] per blank) widened to its known length, every
    [MASK] predicted at once from the bidirectional read -> one list of ids per blank."""
    wide, where = [], []
    for t in part_a:
        if t == mask_id:
            where.append(range(len(wide), len(wide) + lengths[len(where)]))
            wide += [mask_id] * lengths[len(where) - 1]
        else:
            wide.append(int(t))
    T = len(wide)
    pos = np.stack([np.arange(T), np.zeros(T, np.int64)])[None]                # (1, 2, T)
    with eval_mode(model):
        guess = model(np.array([wide]), pos, np.ones((T, T), dtype=bool))[1][0].argmax(-1)   # (T,)
    return [[int(guess[k]) for k in r] for r in where]


def fill_scores(models: dict, sentences, seed: int) -> dict:
    """Per held-out sentence, for each arm and for random words: 1.0 where the filled
    sentence is one the toy language can say ("fill accuracy"), and where it restores
    the removed words ("exact fills"). Every arm fills the same blanks."""
    lang, tok, sp = language(), R.tokenizer(), R.special_ids()
    words = [w for w in lang.vocab if w != END_WORD]
    rng = np.random.default_rng(seed)
    out = {name: {"fill accuracy": [], "exact fills": []} for name in (*models, "random words")}
    for sent in sentences:
        ex = glm_blank_infilling(R.ids(sent), rng, ratio=RATIO, **sp)
        part_a, truth = ex["ids"][:ex["n_a"]], R.spans_in_order(ex)
        lengths = [len(s) for s in truth]
        fills = {"random words": [R.ids(list(rng.choice(words, n))).tolist() for n in lengths]}
        for name, model in models.items():
            fills[name] = (model.fill(part_a, **sp, max_span=max(lengths) + 3) if name == "GLM"
                           else bert_fill(model, part_a, lengths, sp["mask_id"]))
        for name, spans in fills.items():
            out[name]["fill accuracy"].append(float(R.grammatical(lang, tok, part_a, spans, sp["mask_id"])))
            out[name]["exact fills"].append(float(spans == truth))
    return out


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {arm: {"fill accuracy", "exact fills"}}, "floors": {"random words"}, "items"}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    entry = registry.get("glm")
    sentences = [R.ids(s) for s in R.toy_sentences(b["sentences"], seed)]
    held = R.toy_sentences(b["held_out"], seed + 1000)
    schedule = TrainConfig(steps=b["steps"], warmup=max(b["steps"] // 10, 1), seed=seed, progress=progress,
                           **SETTINGS)
    models, losses = {}, {}
    for arm in ARMS:
        model = entry.build(rng=np.random.default_rng(seed), vocab_size=R.tokenizer().vocab_size,
                            **entry.presets["toy"].model)                      # the same initialisation
        losses[arm] = float(train(model, batches(sentences, arm), schedule).train_loss)
        models[arm] = model
    items = fill_scores(models, held, seed + 2)
    means = {name: {k: float(np.mean(v)) for k, v in m.items()} for name, m in items.items()}
    arms = {arm: {**means[arm], "training loss": losses[arm]} for arm in ARMS}
    rows = [{"arm": k, **v} for k, v in arms.items()]
    rows.append({"arm": "random words (floor)", **means["random words"], "training loss": float("nan")})
    return {"rows": rows, "arms": arms, "floors": {"random words": means["random words"]["fill accuracy"]},
            "items": {arm: items[arm] for arm in ARMS}, "steps": b["steps"], "held-out sentences": len(held)}
