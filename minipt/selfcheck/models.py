"""Gradcheck cases: whole models, loss to every parameter (tied weights included)."""
import numpy as np

from ..core.gradcheck import check_module
from ..models.gpt import GPT, GPTConfig
from . import Case

SMALL = dict(vocab_size=7, block_size=6, n_layer=2, n_head=2, d_model=8)
IDX = np.array([[1, 2, 3, 4, 5], [6, 0, 1, 1, 2]])
TARGETS = np.array([[2, 3, 4, 5, 6], [0, 1, -100, 2, 3]])


def _gpt(make):
    def run():
        model = GPT(make(**SMALL), rng=np.random.default_rng(0)).to(np.float64)
        r = np.random.default_rng(1)
        for _, p in model.named_parameters():        # larger weights: non-trivial attention
            p[...] += r.standard_normal(p.shape) * 0.3
        return check_module(model, IDX, TARGETS, select=lambda out: out[0], max_checks=12)
    return run


def _gpt1_finetune(kind: str, mode: str):
    def run():
        from ..data import toy_tasks
        from ..data.toy_words import word_tokenizer
        from ..models.gpt1_finetune import GPT1Finetune
        from ..models.gpt1_inputs import make_batch
        tok = word_tokenizer()
        make = {"entailment": toy_tasks.entailment, "multiple_choice": toy_tasks.multiple_choice}[kind]
        batch = make_batch(kind, make((2, 0, 0), seed=0).train, tok, block_size=40)
        gpt = GPT(GPTConfig.gpt1(**{**SMALL, "vocab_size": tok.vocab_size, "block_size": 40}),
                  rng=np.random.default_rng(0))
        model = GPT1Finetune(gpt, n_classes=2, mode=mode, lm_weight=0.5, rng=np.random.default_rng(1)).to(np.float64)
        r = np.random.default_rng(1)
        for _, p in model.named_parameters():
            p[...] += r.standard_normal(p.shape) * 0.3
        return check_module(model, *batch.as_tuple(), select=lambda out: out[0], max_checks=8)
    return run


CASES = [
    Case("model GPT-1", "post-LN, tied, V7 T5 d8", _gpt(lambda **k: GPTConfig.gpt1(dropout=0.1, **k))),
    Case("model GPT-2", "pre-LN, ln_f, tied", _gpt(GPTConfig.gpt2)),
    Case("model GPT-3", "dense + banded window 2", _gpt(lambda **k: GPTConfig.gpt3(sparse_window=2, **k))),
    Case("model LLaMA", "RMSNorm, SwiGLU, RoPE, untied", _gpt(GPTConfig.llama)),
    Case("GPT-1 entailment head", "<s> p <$> h <e>, aux LM 0.5", _gpt1_finetune("entailment", "classify")),
    Case("GPT-1 choice head", "4 answers softmaxed, aux LM 0.5", _gpt1_finetune("multiple_choice", "choice")),
]
