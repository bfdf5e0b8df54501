"""GPT-1's claims on the toy language (Radford et al. 2018, "Improving Language
Understanding by Generative Pre-Training"): generative pre-training helps fine-tuning
(Table 5, "no pre-training"), the auxiliary LM loss during fine-tuning (Sec. 3.2,
lambda 0.5), and zero-shot skill that grows over pre-training (Fig. 2).

A 2-layer, d 64 GPT-1 (post-LN) pre-trains on toy-language words; the task is multiple
choice with one ending the grammar allows (``data/toy_tasks.py``), so it needs the
language. Every fine-tuning arm starts from a copy of the same pre-trained network (or a
fresh one of the same shape), adds GPT-1's head, and trains for the same steps on its
own fresh warm-up and decay schedule. Zero-shot is GPT-1's heuristic: the ending with the
highest mean log-probability, read off the bare language model half-way through
pre-training and at its end. Floors: chance (one of four endings), and for the
fine-tuned arms the test set's commonest label where it is above chance.
"""
from __future__ import annotations

import copy

import numpy as np

from ..data import toy_tasks
from ..data.toy_words import toy_word_stream, word_tokenizer
from ..inference.scoring import choose
from ..models.decoder.gpt import GPT, GPTConfig
from ..models.decoder.gpt1_finetune import GPT1Finetune, split_correct
from ..tasks.gpt1_inputs import TaskBatches
from ..tokenizers.special import ENDOFTEXT
from ..train import TrainConfig, train

BUDGETS = {"tiny": dict(pretrain=8, finetune=4, examples=(16, 0, 16), probe=8),
           "quick": dict(pretrain=400, finetune=400, examples=(400, 0, 400), probe=200),   # as full: the
           # pre-training gain is small (0.02), and at 250 + 200 steps seed 0 turns it round
           "full": dict(pretrain=400, finetune=400, examples=(400, 0, 400), probe=200)}
ARMS = {"pre-trained": (True, 0.0), "pre-trained + aux LM": (True, 0.5), "scratch": (False, 0.0)}


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {arm: {"accuracy"}}, "floors": {"chance", "majority class"}}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    tok = word_tokenizer()
    eot = tok.token_to_id(ENDOFTEXT)
    stream, _ = toy_word_stream(200_000, block_size=32, batch_size=16, seed=seed)
    probe = toy_tasks.multiple_choice((0, 0, b["probe"]), seed=seed + 1).test

    def zero_shot(model) -> np.ndarray:
        """1 where GPT-1's heuristic picks the right ending of a probe example, else 0, (N,)."""
        return np.array([choose(model, [eot] + tok.encode(e["context"]), [tok.encode(c) for c in e["choices"]])
                         == e["label"] for e in probe], dtype=np.float64)

    cfg = GPTConfig.gpt1(vocab_size=tok.vocab_size, block_size=48, n_layer=2, n_head=4, d_model=64, dropout=0.1)
    gpt = GPT(cfg, rng=np.random.default_rng(seed))
    n, early = b["pretrain"], {}
    train(gpt, stream.get_batch,
          TrainConfig(steps=n, lr=3e-3, min_lr=3e-4, warmup=max(n // 10, 1), eval_every=0, seed=seed,
                      progress=progress),
          callback=lambda step, rec: early.setdefault("acc", zero_shot(gpt)) if step == max(n // 2, 1) else None)
    items = {"zero-shot, half-way through pre-training": early["acc"], "zero-shot, end of pre-training": zero_shot(gpt)}

    task = toy_tasks.multiple_choice(b["examples"], seed=seed + 2)
    batches = TaskBatches("multiple_choice", task, tok, block_size=48, batch_size=8)
    for name, (pretrained, lam) in ARMS.items():
        body = copy.deepcopy(gpt) if pretrained else GPT(cfg, rng=np.random.default_rng(seed + 5))
        model = GPT1Finetune(body, n_classes=2, mode="choice", lm_weight=lam, rng=np.random.default_rng(seed + 1))
        train(model, batches.get_batch, TrainConfig(steps=b["finetune"], lr=1e-3, min_lr=1e-4,
                                                    warmup=max(b["finetune"] // 10, 1), eval_every=0,
                                                    weight_decay=0.01, seed=seed, progress=False))
        items[name] = split_correct(model, batches, "test")
    arms = {k: {"accuracy": float(v.mean())} for k, v in items.items()}
    labels = np.array([e["label"] for e in task.test])
    majority = max(0.25, float(np.bincount(labels).max() / len(labels)))   # never below chance
    rows = [{"arm": k, "test accuracy": v["accuracy"]} for k, v in arms.items()]
    return {"rows": rows, "test_examples": len(labels), "arms": arms,
            "items": {k: {"accuracy": v} for k, v in items.items()},
            "floors": {"chance": 0.25, "majority class": majority}}
