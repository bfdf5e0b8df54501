"""GPT-3's in-context learning on the toy language (Brown et al. 2020, "Language Models
are Few-Shot Learners", Sec. 2 and Fig. 1.2): accuracy grows with the number K of
demonstrations in the prompt, and with model size.

The pre-training documents are lists of solved examples of one task, one per line
(``data/toy_prompts.icl_documents``); the task, one of a family of four (the subject
noun, the verb, the last word, the subject's kind), is never named. Three GPT-3s
(``GPTConfig.gpt3``: a dense and a locally banded layer), 2 layers, widths d 16, 48 and
96, pre-train on the same documents for the same steps and schedule. Then, with no
gradient step, each answers held-out queries (sentences excluded from pre-training on
which the four tasks disagree) after K = 0, 1, 2, 4, 8 demonstrations of a task on fresh
sentences. The score is GPT-3's multiple-choice one: the argmax of the next token over
the answers some task of the family could give (``inference.scoring.one_token_answers``),
averaged over the four tasks. The floor is the chance of guessing the task, 1/4.
"""
from __future__ import annotations

import numpy as np

from ..data import toy_prompts as P
from ..data.batching import TokenStream
from ..inference.scoring import one_token_answers
from ..models.decoder.gpt import GPT, GPTConfig
from ..tasks.metrics import accuracy
from ..train import TrainConfig, train

BUDGETS = {"tiny": dict(docs=200, steps=4, queries=8, widths=(16, 96)),   # the claims read d 16 and d 96
           "quick": dict(docs=4000, steps=300, queries=100, widths=(16, 48, 96)),
           "full": dict(docs=4000, steps=600, queries=100, widths=(16, 48, 96))}
KS = (0, 1, 2, 4, 8)
BLOCK, BATCH = 84, 8          # the longest eight-shot prompt (examples of at most 6 words) fits in 84


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {"K = k" (widest model) and "d D, K = 8": {"accuracy"}}, "floors": {"chance"}}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    tok = P.prompt_tokenizer()
    pad = tok.token_to_id("[PAD]")
    queries = P.heldout_sentences(b["queries"], seed=1000 * seed + 200, max_words=7, keep=P.telling)
    held_out = P.exclusion(queries)
    stream = TokenStream(tok.encode_array(P.join_documents(P.icl_documents(b["docs"], seed=1000 * seed + 2,
                                                                             exclude=held_out))),
                         tok.encode_array(P.join_documents(P.icl_documents(200, seed=1000 * seed + 3,
                                                                             exclude=held_out))),
                         block_size=BLOCK, batch_size=BATCH)
    schedule = TrainConfig(steps=b["steps"], lr=6e-3, min_lr=6e-4, warmup=max(b["steps"] // 10, 1), eval_every=0,
                           seed=seed, progress=progress)
    models = {}
    for d in b["widths"]:
        cfg = GPTConfig.gpt3(vocab_size=tok.vocab_size, block_size=BLOCK, n_layer=2, n_head=4, d_model=d)
        models[d] = GPT(cfg, rng=np.random.default_rng(1000 * seed + d))
        train(models[d], stream.get_batch, schedule)

    cands = [P.candidates(w) for w, _ in queries]
    acc = {}                                    # (d, K) -> mean choice accuracy over the tasks
    for k in KS:
        per_task = {d: [] for d in models}
        for t, task in enumerate(P.TASKS):
            prompts, answers = P.few_shot_prompts(task, queries, k, seed=1000 * seed + 10 * t + k, exclude=held_out,
                                                  max_words=6)
            for d, model in models.items():
                per_task[d].append(accuracy(one_token_answers(model, tok, prompts, cands, pad)[1], answers))
        for d in models:
            acc[d, k] = float(np.mean(per_task[d]))
    wide = max(models)
    arms = {f"K = {k}": {"accuracy": acc[wide, k]} for k in KS}
    arms.update({f"d {d}, K = 8": {"accuracy": acc[d, 8]} for d in models})
    rows = [{"width": d, "parameters": models[d].num_parameters(), **{f"K={k}": acc[d, k] for k in KS}}
            for d in models]
    return {"rows": rows, "arms": arms, "floors": {"chance": 1 / len(P.TASKS)}, "queries": len(queries),
            "widest": wide}
