"""DialoGPT's MMI re-ranking against bland replies (Zhang et al. 2020, "DialoGPT:
Large-Scale Generative Pre-training for Conversational Response Generation", Sec. 4;
the MMI criterion of Li et al. 2016).

Two word-level GPT-2s (2 layers, d 64) of the same shape, schedule and steps train on the
toy dialogues (``data/toy_text_tasks.dialogue``: after a normal turn a reply is one of
four stock, bland replies with probability 0.4, otherwise it picks up the turn's subject):
the **forward** model on history -> response, p(T | S), the **backward** model on the
response followed by the history turns in reverse, p(S | T). For each held-out history
cut after a normal turn, the forward model draws 8 top-k (k = 10) candidates, and three
answers are kept from the same candidates:

- **sampling**: the first candidate (plain top-k sampling, no re-ranking);
- **MLE**: the candidate with the highest log P(T | S);
- **MMI**: the candidate with the highest log P(S | T) (DialoGPT's re-ranking).

Metrics: the share of non-bland replies and the share that picks up the last turn's
subject noun. Beside them: the data's own replies to the same histories (about 0.6
non-bland, the generator's rate), and the floor of a replier that is always bland (0).
"""
from __future__ import annotations

import numpy as np

from ..data.toy_grammar import STATES, SUBJECT_STATES
from ..data.toy_text_tasks import BLAND, dialogue
from ..data.toy_words import PAD, word_tokenizer
from ..models.decoder.dialogpt import mmi_rerank, sample_candidates
from ..models.decoder.gpt import GPT, GPTConfig
from ..objectives.dialogue import DialogueBatches, encode_session
from ..tokenizers.special import ENDOFTEXT
from ..train import TrainConfig, train

BUDGETS = {"tiny": dict(sessions=100, steps=4, cases=10), "quick": dict(sessions=2000, steps=250, cases=200),
           "full": dict(sessions=2000, steps=400, cases=300)}
N_CANDIDATES, TOP_K = 8, 10
SUBJECTS = frozenset(w for s in SUBJECT_STATES for w in STATES[s])


def subject(text: str) -> str | None:
    """The toy sentence's subject noun: the first subject word (objects come after the verb)."""
    return next((w for w in text.split() if w in SUBJECTS), None)


def measures(replies: list[str], histories: list[list[str]]) -> dict[str, float]:
    """Non-bland share, and the share whose subject is the last history turn's subject."""
    return {"non-bland share": float(np.mean([r not in BLAND for r in replies])),
            "pick-up": float(np.mean([subject(r) is not None and subject(r) == subject(h[-1])
                                      for r, h in zip(replies, histories)]))}


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {"MMI", "sampling", "MLE": {"non-bland share", "pick-up"}},
    "floors": {"data", "always bland"}}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    tok = word_tokenizer()
    eot, pad = tok.token_to_id(ENDOFTEXT), tok.token_to_id(PAD)
    data = dialogue((b["sessions"], 100, 2 * b["cases"]), seed=seed)
    sessions = {split: [e["turns"] for e in data.split(split)] for split in ("train", "val")}
    cfg = GPTConfig.gpt2(vocab_size=tok.vocab_size, block_size=48, n_layer=2, n_head=4, d_model=64)
    schedule = TrainConfig(steps=b["steps"], lr=3e-3, min_lr=3e-4, warmup=max(b["steps"] // 10, 1), eval_every=0,
                           seed=seed, progress=progress)
    models = {}
    for i, direction in enumerate(("forward", "backward")):
        batches = DialogueBatches.from_sessions(sessions["train"], sessions["val"], tok, direction, batch_size=32,
                                                max_len=cfg.block_size)
        models[direction] = GPT(cfg, rng=np.random.default_rng(1000 * seed + i))
        train(models[direction], batches.get_batch, schedule)

    cases = [(e["turns"][:m], e["turns"][m]) for e in data.test
             for m in range(1, len(e["turns"])) if not e["bland"][m - 1]][:b["cases"]]
    rng = np.random.default_rng(seed + 7)
    replies = {"sampling": [], "MLE": [], "MMI": []}
    for turns, _ in cases:
        h_ids = encode_session(turns, tok)
        cands = sample_candidates(models["forward"], h_ids, N_CANDIDATES, eot_id=eot, rng=rng, top_k=TOP_K)
        r = mmi_rerank(models["backward"], h_ids, cands, eot_id=eot, pad_id=pad, forward_model=models["forward"])
        texts = [tok.decode(c) for c in cands]
        replies["sampling"].append(texts[0])
        replies["MLE"].append(texts[int(np.argmax(r.forward))])
        replies["MMI"].append(texts[r.best])
    histories = [h for h, _ in cases]
    arms = {name: measures(texts, histories) for name, texts in replies.items()}
    truth = measures([t for _, t in cases], histories)
    rows = [{"replies": k, **v} for k, v in {**arms, "data": truth}.items()]
    return {"rows": rows, "arms": arms, "floors": {"data": truth["non-bland share"], "always bland": 0.0},
            "cases": len(cases)}
