"""The claims ledger: every comparison the papers make, measured like for like over seeds.

One row per claim: the paper and the claim in one sentence, the experiment that tests it,
the metric and its trivial floor, each arm's mean ± standard deviation over seeds, and the
verdict by the one rule of ``verdict.py`` (reproduced / not reproduced / reversed / not
testable at this scale) with the figures behind it. ``minipt experiment claims`` prints
it from the committed full-budget runs (``ledger/NAME.json``, written by
``minipt experiment claims --run NAME``); a claim whose experiment has no committed run
over seeds says so, and stays in the ledger.

An experiment serves the ledger when ``run(budget, seed=...)`` returns, beside its
``rows``, ``arms`` ({arm: {metric: value}}) and ``floors`` ({floor name: value}) for the
same data and seed, and, where it can, ``items`` ({arm: {metric: per-item scores whose
mean is the value}}), from which the ledger keeps each claim's paired test-set error.
"""
from __future__ import annotations

from dataclasses import dataclass

from .verdict import judge

NOT_RUN = "not yet measured"


@dataclass(frozen=True)
class Claim:
    key: str
    paper: str
    says: str                  # the claim in one sentence
    experiment: str            # the experiment behind it (``minipt experiment NAME``)
    metric: str                # a key of each arm's metrics
    better: str                # "higher" or "lower"
    arms: tuple[str, str]      # (the arm the paper says wins, the arm it beats)
    floor: str                 # a key of the run's ``floors``: the trivial floor of the metric
    unit: str = ""


def _c(key, paper, says, experiment, metric, better, arms, floor, unit=""):
    return Claim(key, paper, says, experiment, metric, better, tuple(arms), floor, unit)


NATS = "nats/word"
CLAIMS = (
    _c("kn-vs-addk", "Kneser & Ney 1995; Chen & Goodman 1999",
       "Kneser-Ney smoothing predicts held-out words better than add-k smoothing (k tuned on held-out words).",
       "smoothing", "held-out", "lower", ("Kneser-Ney trigram", "add-k trigram"), "unigram", NATS),
    _c("nnlm-vs-trigram", "Bengio et al. 2003",
       "A neural LM over learnt word features beats a smoothed trigram.",
       "nnlm", "held-out", "lower", ("NNLM", "Kneser-Ney trigram"), "unigram", NATS),
    _c("mixture-vs-nnlm", "Bengio et al. 2003",
       "Averaging the NNLM's probabilities with a trigram's beats the NNLM alone.",
       "nnlm", "held-out", "lower", ("mixture", "NNLM"), "unigram", NATS),
    _c("mixture-vs-trigram", "Bengio et al. 2003",
       "Averaging the NNLM's probabilities with a trigram's beats the trigram alone.",
       "nnlm", "held-out", "lower", ("mixture", "Kneser-Ney trigram"), "unigram", NATS),
    _c("skipgram-vs-cbow", "Mikolov et al. 2013a",
       "Skip-gram answers semantic analogies better than CBOW.",
       "word2vec", "analogy", "higher", ("skip-gram + NS", "CBOW + NS"), "chance"),
    _c("neg-vs-hs", "Mikolov et al. 2013b",
       "Negative sampling gives better analogy vectors than hierarchical softmax.",
       "word2vec", "analogy", "higher", ("skip-gram + NS", "skip-gram + HS"), "chance"),
    _c("elmo-senses", "Peters et al. 2018",
       "ELMo's upper layer separates word senses that static vectors cannot.",
       "elmo-senses", "sense accuracy", "higher", ("ELMo layer 2", "word2vec"), "chance"),
    _c("gpt1-pretraining", "Radford et al. 2018",
       "Generative pre-training improves fine-tuned task accuracy over training from scratch.",
       "gpt1-finetune", "accuracy", "higher", ("pre-trained", "scratch"), "majority class"),
    _c("gpt1-aux-loss", "Radford et al. 2018",
       "An auxiliary LM loss during fine-tuning helps.",
       "gpt1-finetune", "accuracy", "higher", ("pre-trained + aux LM", "pre-trained"), "majority class"),
    _c("gpt-zero-shot", "Radford et al. 2018 (Fig. 2); Radford et al. 2019",
       "Zero-shot task skill grows with pre-training.",
       "gpt1-finetune", "accuracy", "higher",
       ("zero-shot, end of pre-training", "zero-shot, half-way through pre-training"), "chance"),
    _c("gpt3-k", "Brown et al. 2020",
       "In-context accuracy (the widest model) grows with more demonstrations, from K = 1 to K = 8.",
       "in-context", "accuracy", "higher", ("K = 8", "K = 1"), "chance"),   # K = 0 sits below chance
    _c("gpt3-width", "Brown et al. 2020",
       "In-context accuracy (eight demonstrations) grows with model width.",
       "in-context", "accuracy", "higher", ("d 96, K = 8", "d 16, K = 8"), "chance"),
    _c("dialogpt-mmi", "Zhang et al. 2020",
       "MMI re-ranking cuts bland replies (top-k sampling alone matches the data's share of them).",
       "dialogpt", "non-bland share", "higher", ("MMI", "sampling"), "always bland"),
    _c("llama-vs-gpt2", "Touvron et al. 2023",
       "RMSNorm, SwiGLU and RoPE beat GPT-2's block at equal parameters.",
       "llama", "held-out", "lower", ("LLaMA", "GPT-2"), "unigram", "nats/char"),
    _c("bert-bidirectional", "Devlin et al. 2019",
       "Bidirectional pre-training beats left-to-right on span QA at equal compute.",
       "bert-direction", "span QA", "higher", ("bidirectional", "left-to-right"), "first subject"),
    _c("bert-fine-tuning", "Devlin et al. 2019",
       "Fine-tuning beats the feature-based (frozen) approach.",
       "fine-tuning", "exact match", "higher", ("pre-trained, fine-tuned", "pre-trained, frozen"), "baseline"),
    _c("roberta-dynamic", "Liu et al. 2019",
       "Dynamic masking beats static masking (slightly, in the paper).",
       "bert-variants", "MLM loss", "lower", ("dynamic", "static"), "unigram"),
    _c("roberta-no-nsp", "Liu et al. 2019",
       "Full sentences without NSP beat sentence pairs with NSP downstream.",
       "bert-variants", "accuracy", "higher", ("no NSP", "NSP"), "majority class"),
    _c("albert-sop", "Lan et al. 2020",
       "SOP teaches inter-sentence coherence that NSP does not: an SOP head also does NSP, an NSP head not SOP "
       "(mean accuracy over NSP and SOP pairs).",
       "bert-variants", "NSP and SOP accuracy", "higher", ("MLM + SOP", "MLM + NSP"), "chance"),
    _c("albert-sharing", "Lan et al. 2020",
       "Sharing one layer's weights across a 2-layer stack beats an unshared 1-layer model of equal parameter count.",
       "bert-variants", "MLM accuracy", "higher", ("shared", "unshared"), "baseline"),
    _c("electra-compute", "Clark et al. 2020",
       "ELECTRA beats BERT downstream at equal pre-training compute (training FLOPs, generator included).",
       "bert-variants", "accuracy", "higher", ("ELECTRA", "BERT"), "majority class"),
    _c("span-masking", "Joshi et al. 2020",
       "Span masking beats token masking on span QA.",
       "masking", "exact match", "higher", ("span", "token"), "baseline"),
    _c("whole-word-masking", "Cui et al. 2019",
       "Whole-word masking beats token masking.",
       "masking", "exact match", "higher", ("whole word", "token"), "baseline"),
    _c("entity-masking", "Sun et al. 2019",
       "Entity masking beats token masking on a task that needs facts.",
       "knowledge", "accuracy", "higher", ("entity masking", "BERT"), "chance"),
    _c("t5-architectures", "Raffel et al. 2020",
       "The encoder-decoder beats the decoder-only LM at equal compute.",
       "architectures", "score", "higher", ("encoder-decoder", "decoder-only"), "commonest answer"),
    _c("t5-prefix-lm", "Raffel et al. 2020",
       "A prefix LM, its input fully visible, beats the decoder-only (causal) LM of the same size.",
       "architectures", "score", "higher", ("prefix LM", "decoder-only"), "commonest answer"),
    _c("t5-denoising", "Raffel et al. 2020",
       "A denoising objective beats prefix language modelling.",
       "objectives", "score", "higher", ("BERT-style", "prefix LM"), "commonest answer"),
    _c("t5-spans", "Raffel et al. 2020",
       "Span corruption (mean length 3) beats i.i.d. corruption at the same 15 % rate (slightly, in the paper).",
       "objectives", "score", "higher", ("spans, mean 3", "i.i.d. 15 %"), "commonest answer"),
    _c("t5-short-targets", "Raffel et al. 2020",
       "Span corruption's targets are shorter than i.i.d. corruption's at the same rate, so pre-training costs less.",
       "objectives", "target length", "lower", ("spans, mean 3", "i.i.d. 15 %"), "whole piece", "tokens"),
    _c("t5-pretraining", "Raffel et al. 2020",
       "Span-corruption pre-training beats no pre-training at equal fine-tuning budget.",
       "objectives", "score", "higher", ("spans, mean 3", "no pre-training"), "commonest answer"),
    # bart-noises: fine-tuned summarisation test loss; the floor is a model fine-tuned from scratch
    _c("bart-infilling", "Lewis et al. 2020",
       "Text infilling is the best single noise.",
       "bart-noises", "test loss", "lower", ("infilling", "masking"), "no pre-training", "nats/token"),
    _c("mass-k", "Song et al. 2019",
       "A fragment of half the sentence (k = m/2) beats the whole sentence (k = m, GPT-like).",
       "bart-noises", "test loss", "lower", ("MASS k = m/2", "MASS k = m"), "no pre-training", "nats/token"),
    _c("mass-k-vs-1", "Song et al. 2019",
       "A fragment of half the sentence (k = m/2) beats a single token (k = 1, BERT-like).",
       "bart-noises", "test loss", "lower", ("MASS k = m/2", "MASS k = 1"), "no pre-training", "nats/token"),
    _c("xlnet-permutation", "Yang et al. 2019",
       "The permutation LM beats left-to-right at equal compute (held-out text read left to right).",
       "xlnet", "held-out", "lower", ("permutation LM", "left-to-right"), "unigram", "nats/char"),
    _c("unilm-understanding", "Dong et al. 2019",
       "One network trained under four masks makes a better bidirectional encoder (held-out cloze after equal "
       "fine-tuning as one) than the same network trained under the seq2seq mask alone at equal steps.",
       "unilm", "cloze accuracy", "higher", ("UniLM", "seq2seq only"), "commonest word"),
    _c("unilm-generation", "Dong et al. 2019",
       "Training under four masks, not the seq2seq mask alone, generalises better: it generates better after "
       "equal fine-tuning (target tokens right, toy translation).",
       "unilm", "token accuracy", "higher", ("UniLM", "seq2seq only"), "commonest target word"),
    _c("glm-blanks", "Du et al. 2022",
       "Autoregressive blank infilling fills multi-token blanks the language can say more often than BERT's "
       "independent [MASK]s (told the lengths) in the same network at equal steps.",
       "glm", "fill accuracy", "higher", ("GLM", "BERT-style"), "random words"),
    _c("transfer-stages", "Gururangan et al. 2020",
       "Domain- then task-adaptive pre-training beats fine-tuning the general pre-trained model alone.",
       "transfer", "accuracy", "higher", ("general + domain + task", "general"), "majority class"),
    _c("transfer-forgetting", "Gururangan et al. 2020",
       "Adapting to a domain forgets the general domain.",
       "transfer", "general loss", "lower", ("general", "general + domain"), "unigram", NATS),
    _c("ernie-knowledge", "Zhang et al. 2019",
       "Fusing entity embeddings beats BERT on a task that needs facts.",
       "knowledge", "accuracy", "higher", ("ERNIE", "BERT"), "chance"),
    _c("vl-streams", "Lu et al. 2019",
       "A two-stream model with co-attention beats a single-stream one of equal parameter count.",
       "multimodal", "VQA accuracy", "higher", ("two-stream, pre-trained", "single-stream, pre-trained"),
       "majority answer"),
    _c("vl-pretraining-vqa", "Lu et al. 2019",
       "Pre-training helps VQA at equal total steps.",
       "multimodal", "VQA accuracy", "higher", ("two-stream, pre-trained", "two-stream, scratch"), "majority answer"),
    _c("vl-pretraining-retrieval", "Lu et al. 2019",
       "Pre-training helps image-text retrieval at equal total steps.",
       "multimodal", "R@5", "higher", ("two-stream, pre-trained", "two-stream, scratch"), "chance retrieval"),
)


def row(claim: Claim, record: dict | None) -> dict:
    """The ledger row of ``claim`` from the committed record of its experiment (None: not run)."""
    base = {"claim": claim.key, "paper": claim.paper, "says": claim.says, "experiment": claim.experiment,
            "metric": claim.metric, "better": claim.better, "unit": claim.unit, "floor": claim.floor,
            "arms": list(claim.arms)}
    if record is None:
        return {**base, "verdict": NOT_RUN, "seeds": [],
                "why": f"no committed run of `minipt experiment {claim.experiment}` over seeds yet"}
    runs = record["runs"]
    try:
        values = [[r["arms"][arm][claim.metric] for r in runs] for arm in claim.arms]
        floor = [r["floors"][claim.floor] for r in runs]
    except KeyError as e:
        raise ValueError(f"claim {claim.key}: the record of {claim.experiment} has no {e} "
                         f"(arms {sorted(runs[0]['arms'])}, floors {sorted(runs[0]['floors'])})") from None
    item_se = [r["paired_se"][claim.key] for r in runs] if all(claim.key in r.get("paired_se", {})
                                                                 for r in runs) else None
    j = judge(values[0], values[1], floor, claim.better, names=claim.arms, unit=claim.unit, item_se=item_se)
    spread = lambda s: {"mean": s.mean, "sd": s.sd, "se": s.se}
    return {**base, "verdict": j.verdict, "why": j.why, "seeds": [r["seed"] for r in runs],
            "budget": record["budget"], "winner": spread(j.winner), "loser": spread(j.loser),
            "floor_value": spread(j.floor), "advantage": spread(j.advantage)}
