"""LLaMA's changes to GPT-2's block, one at a time and together, at equal parameter count
(Touvron et al. 2023, "LLaMA: Open and Efficient Foundation Language Models": pre-RMSNorm
(Zhang & Sennrich 2019), SwiGLU (Shazeer 2020), rotary positions (Su et al. 2021)).

A 2-layer, d 64 character GPT-2 on the toy language, then each variant with one change
and the feed-forward width that brings it back to GPT-2's parameter count
(``models/decoder/llama.py``: ``match_d_ff``, ``llama_like``). Every arm gets the same
seed, batches, steps and AdamW schedule, and is scored on the whole validation text in
non-overlapping windows of the trained context (nats per character), beside the floor
of a model without context (the training text's character unigram entropy).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..data.batching import TokenStream
from ..data.hmm_language import toy_corpus
from ..models.decoder.gpt import GPT, GPTConfig
from ..models.decoder.llama import count_parameters, llama_like, match_d_ff
from ..tokenizers.char import CharTokenizer
from ..train import TrainConfig, train

BUDGETS = {"tiny": dict(chars=20_000, steps=10), "quick": dict(chars=60_000, steps=150),
           "full": dict(chars=120_000, steps=600)}
BLOCK, BATCH = 64, 16


def variants(gpt2: GPTConfig) -> dict[str, GPTConfig]:
    """GPT-2, each of LLaMA's three changes alone, all three, and the LLaMA-style block,
    all at GPT-2's parameter count."""
    P = count_parameters(gpt2)
    return {"GPT-2": gpt2,
            "+ RMSNorm": match_d_ff(replace(gpt2, norm="rms"), P),
            "+ SwiGLU": match_d_ff(replace(gpt2, activation="swiglu"), P),
            "+ RoPE": match_d_ff(replace(gpt2, positions="rope"), P),
            "+ all three": match_d_ff(replace(gpt2, norm="rms", activation="swiglu", positions="rope"), P),
            "LLaMA": llama_like(gpt2)}


def held_out(model: GPT, ids: np.ndarray) -> float:
    """Nats per character over non-overlapping windows of ``BLOCK`` characters."""
    n = (len(ids) - 1) // BLOCK
    x = ids[:n * BLOCK].reshape(n, BLOCK)                                   # (N, T)
    y = ids[1:n * BLOCK + 1].reshape(n, BLOCK)                              # (N, T)
    return -model.log_prob(x, y) / y.size


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {variant: {"held-out", "parameters"}}, "floors": {"unigram"}, "oracle"}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    train_text, val_text, oracle, _ = toy_corpus(b["chars"], seed=seed)
    tok = CharTokenizer().fit(train_text + val_text)
    tr, va = tok.encode_array(train_text), tok.encode_array(val_text)
    data = TokenStream(tr, va, block_size=BLOCK, batch_size=BATCH)
    gpt2 = GPTConfig.gpt2(vocab_size=tok.vocab_size, block_size=BLOCK, n_layer=2, n_head=4, d_model=64)
    config = TrainConfig(steps=b["steps"], lr=3e-3, min_lr=3e-4, warmup=max(b["steps"] // 10, 1), eval_every=0,
                         seed=seed, progress=progress)
    arms = {}
    for name, c in variants(gpt2).items():
        model = GPT(c, rng=np.random.default_rng(seed))
        train(model, data.get_batch, config)
        arms[name] = {"held-out": float(held_out(model, va)), "parameters": model.num_parameters()}
    p = np.bincount(tr, minlength=tok.vocab_size) / len(tr)
    unigram = float(-(p[p > 0] * np.log(p[p > 0])).sum())
    rows = [{"variant": k, "held-out nats/char": v["held-out"], "parameters": v["parameters"]} for k, v in arms.items()]
    return {"rows": rows, "arms": arms, "floors": {"unigram": unigram}, "oracle": float(oracle)}
