"""The papers' comparisons, one experiment per file. Each file has ``BUDGETS`` (``tiny``
for tests, ``quick`` by default, ``full``) and ``run(budget, *, seed, progress) -> dict``
whose ``rows`` are the results table; ``minipt experiment NAME`` runs one and writes
``results.json``, ``results.md`` (the table) and ``results.png`` (a bar chart). The claims
ledger (``claims.py``, ``ledger.py``, ``minipt experiment claims``) judges each paper's
claim from committed runs over seeds."""
from __future__ import annotations

import importlib

EXPERIMENTS = {   # name -> (module, what it compares)
    "smoothing": ("minipt.experiments.smoothing", "Kneser-Ney vs add-k (k tuned) trigrams, unigram floor"),
    "nnlm": ("minipt.experiments.nnlm_mixture", "Bengio's NNLM vs a Kneser-Ney trigram, and their mixture"),
    "elmo-senses": ("minipt.experiments.elmo_senses",
                    "a sense probe on word2vec vs each ELMo layer and the scalar mix (bank, bat)"),
    "gpt1-finetune": ("minipt.experiments.gpt1_finetune",
                      "GPT-1 fine-tuned pre-trained vs scratch, with and without the auxiliary LM loss; "
                      "zero-shot over pre-training"),
    "llama": ("minipt.experiments.llama_ablation",
              "GPT-2's block vs RMSNorm, SwiGLU, RoPE, all three and LLaMA's block at equal parameters"),
    "word2vec": ("minipt.experiments.word2vec_variants",
                 "skip-gram vs CBOW, negative sampling vs hierarchical softmax, on the toy analogies"),
    "knowledge": ("minipt.experiments.knowledge",
                  "BERT vs entity masking (ERNIE-Baidu) vs entity fusion (ERNIE-Tsinghua) on a task needing facts"),
    "transfer": ("minipt.experiments.transfer",
                 "four-stage transfer: general, domain- and task-adaptive pre-training, fine-tuning; forgetting"),
    "fine-tuning": ("minipt.experiments.fine_tuning",
                    "BERT fine-tuned vs feature-based (frozen) vs no pre-training on four toy tasks"),
    "masking": ("minipt.experiments.masking",
                "BERT pre-trained with token, whole-word, span and phrase masking; downstream span QA"),
    "multimodal": ("minipt.experiments.multimodal",
                   "single- vs two-stream vision-language models, pre-trained vs not: retrieval and VQA"),
    "bert-variants": ("minipt.experiments.bert_variants",
                      "RoBERTa's static vs dynamic masking and NSP ablation, ALBERT's NSP vs SOP, ELECTRA vs BERT"),
    "bart-noises": ("minipt.experiments.bart_noises",
                    "BART's masking, deletion and infilling and MASS's k = 1, m/2, m at equal pre-training "
                    "compute, fine-tuned on 100 toy summarisation pairs, against no pre-training"),
    "architectures": ("minipt.experiments.architectures",
                      "T5's architectures at equal compute: encoder-decoder, shared encoder-decoder, decoder-only, prefix LM"),
    "objectives": ("minipt.experiments.objectives",
                   "T5's objectives at equal compute: none, prefix LM, BERT-style, i.i.d. 15 %, spans of mean 3"),
    "in-context": ("minipt.experiments.in_context",
                   "GPT-3's in-context choice accuracy against K demonstrations and width (d 16, 48, 96)"),
    "bert-direction": ("minipt.experiments.bert_direction",
                       "BERT bidirectional MLM vs the same encoder left to right at equal pre-training compute, "
                       "fine-tuned on span QA and tagging"),
    "dialogpt": ("minipt.experiments.dialogpt_mmi",
                 "DialoGPT: MMI re-ranking vs top-k sampling vs the MLE choice, bland replies and topic pick-up"),
    "xlnet": ("minipt.experiments.xlnet_permutation",
              "XLNet's permutation LM vs the same network left to right at equal compute, read left to right"),
    "unilm": ("minipt.experiments.unilm_masks",
              "UniLM's four masks vs the same network under the seq2seq mask only at equal steps: "
              "bidirectional cloze, then toy translation after equal fine-tuning"),
    "glm": ("minipt.experiments.glm_blanks",
            "GLM's autoregressive blank infilling vs BERT-style independent [MASK]s in the same network "
            "at equal steps: filled sentences the toy language can say"),
}


def get(name: str):
    """The experiment's module (``run``, ``BUDGETS``), or a ValueError listing the names."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    return importlib.import_module(EXPERIMENTS[name][0])
