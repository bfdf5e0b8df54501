"""Single stream against two streams, pre-trained against not, on toy scenes (seed 001's
multimodal section; VisualBERT / UNITER against ViLBERT / LXMERT).

Both designs have about the same number of parameters: the single stream has four
joint layers; the two-stream model one text layer and one co-attention layer (a text
block and a region block, each with self- and cross-attention). Each is

1. pre-trained (or not) on the three objectives (MLM, MRC + MRFR, ITM) over generated
   caption-scene pairs, half of them mismatched;
2. fine-tuned and tested on two downstream tasks from the same scene generator:
   - retrieval: the image-text matching head fine-tuned, then each of ``n_candidates``
     held-out captions ranks the held-out scenes by P(match), and each scene ranks the
     captions: recall@1 and recall@5 both ways;
   - visual question answering: "what colour is the ball ?" / "how many objects ?",
     answered from the pooled [CLS] state, accuracy on held-out scenes.

**Equal total steps.** The pre-trained arm gets ``pretrain`` steps on the three objectives,
then ``finetune`` steps on each task on a fresh schedule (one ``train`` call per phase:
fresh warm-up, decay and Adam moments); the scratch arm gets ``pretrain + finetune``
steps on each task, so both arms train for the same number of steps before each test.
The floors: the test split's majority answer for VQA, and chance retrieval (k of
``n_candidates``) for recall@k. VQA is tested on ``questions`` held-out scenes (one
question each), retrieval on ``candidates``; ``items`` keeps each test item's score
(a question right or not; a caption's and its scene's hit@5, averaged), so the ledger
has the paired standard error of every comparison.

``grounding`` reads the attention of the pre-trained models: for each caption word that
names an object (colour or category word), is the region it attends to most the object
it names? (single stream: last layer's self-attention from the word to the regions;
two streams: the last co-attention layer's cross-attention from the word to the regions,
both averaged over heads).
"""
from __future__ import annotations

import numpy as np

from ..core.module import eval_mode
from ..data import toy_scenes as ts
from ..models.multimodal.single_stream import SingleStream, VLConfig
from ..models.multimodal.two_stream import TwoStream
from ..objectives.vision_language import (
    make_batch,
    region_batch,
    text_batch,
    vocabulary,
)
from ..train import TrainConfig, train

DESIGNS = {"single stream": (SingleStream, dict(n_layer=4)),
           "two streams": (TwoStream, dict(n_text_layer=1, n_region_layer=0, n_cross_layer=1))}
BUDGETS = {"tiny": dict(pretrain=20, finetune=10, pairs=200, candidates=10, questions=40),     # seconds: for tests
           "quick": dict(pretrain=600, finetune=200, pairs=4000, candidates=50, questions=400),
           "full": dict(pretrain=1500, finetune=300, pairs=12000, candidates=100, questions=1000)}
TASKS = ("retrieval", "VQA")
LR = 1e-3          # every phase of every arm; the presets' rate (at 3e-3 the two-stream model and the
                   # scratch arms never left chance retrieval)


def build(design: str, seed: int = 0, dtype=np.float32):
    cls, settings = DESIGNS[design]
    return cls(VLConfig(vocab_size=len(vocabulary()), **settings), rng=np.random.default_rng(seed), dtype=dtype)


def _pretrain_batches(pairs):
    def get(split, rng):
        return make_batch([pairs[i] for i in rng.integers(0, len(pairs), 32)], rng, dtype=np.float32)
    return get


def _itm_batches(pairs):
    def get(split, rng):
        b = make_batch([pairs[i] for i in rng.integers(0, len(pairs), 32)], rng, mask_prob=0.0, region_mask_prob=0.0,
                       dtype=np.float32)
        return b._replace(feature_targets=None)
    return get


def _vqa(scenes, rng):
    vocab = {w: i for i, w in enumerate(vocabulary())}
    qa = [ts.question(s, rng) for s in scenes]
    ids, text_mask = text_batch([q for q, _ in qa], vocab)
    feats, boxes, region_mask = region_batch(scenes, np.float32)
    answers = np.array([ts.answers().index(a) for _, a in qa])
    return (ids, text_mask, feats, boxes, region_mask), answers


def _vqa_batches(scenes):
    def get(split, rng):
        inputs, answers = _vqa([scenes[i] for i in rng.integers(0, len(scenes), 32)], rng)
        return (*inputs, None, None, None, None, answers)
    return get


def _fit(model, get_batch, steps, seed, progress, callback=None):
    config = TrainConfig(steps=steps, lr=LR, min_lr=LR / 10, warmup=steps // 10, weight_decay=0.01,
                         eval_every=0, seed=seed, progress=progress)
    train(model, get_batch, config, callback=callback)


def match_scores(model, scenes, captions) -> np.ndarray:
    """(n, n) log P(match) of caption i with scene j."""
    vocab = {w: i for i, w in enumerate(vocabulary())}
    n = len(scenes)
    out = np.zeros((n, n))
    with eval_mode(model):
        for i, words in enumerate(captions):
            ids, text_mask = text_batch([words] * n, vocab)
            model(ids, text_mask, *region_batch(scenes, model.dtype))
            z = model.heads.scores["itm"]                                  # (n, 2)
            out[i] = z[:, 1] - np.logaddexp(z[:, 0], z[:, 1])
    return out


def hits(scores: np.ndarray, k: int) -> np.ndarray:
    """(n,) whether each row's true column (the diagonal) is among its k best; a tie counts
    against it (a model that scores everything alike gets no credit)."""
    ranks = (scores >= np.diag(scores)[:, None]).sum(1) - 1
    return ranks < k


def recall(scores: np.ndarray, k: int) -> float:
    """Share of rows whose true column is among the k best (``hits``)."""
    return float(hits(scores, k).mean())


def word_region_attention(model, scenes, captions: list[list[str]]) -> np.ndarray:
    """(B, T, N) attention of each token of ``[CLS] caption [SEP]`` to each region,
    averaged over heads: the single stream's last self-attention layer, or the two-stream
    model's last cross-attention from the words to the regions."""
    vocab = {w: i for i, w in enumerate(vocabulary())}
    ids, text_mask = text_batch(captions, vocab)
    feats, boxes, region_mask = region_batch(scenes, model.dtype)
    single = isinstance(model, SingleStream)
    attn = model.encoder.blocks[-1].attn if single else model.cross[-1].text_block.cross_attn
    attn.record = True
    try:
        with eval_mode(model):
            model.encode(ids, text_mask, feats, boxes, region_mask)
    finally:
        attn.record = False
    w = attn.last_weights.mean(1)                                          # (B, T, S)
    return w[:, :, ids.shape[1]:] if single else w                          # words -> regions


def grounding(model, scenes, rng) -> float:
    """Share of grounded caption words whose most-attended region is their object."""
    caps = [ts.caption(s, rng) for s in scenes]
    w = word_region_attention(model, scenes, [c for c, _ in caps])        # (B, T, N)
    hits = [int(np.argmax(np.where(np.arange(w.shape[2]) < scenes[b].n_regions, w[b, 1 + word], -1)) == region)
            for b, (_, grounded) in enumerate(caps) for word, region in grounded]
    return float(np.mean(hits))


def arm_name(design: str, pretrained: bool) -> str:
    return f"{design.replace('single stream', 'single-stream').replace('two streams', 'two-stream')}, " \
        f"{'pre-trained' if pretrained else 'scratch'}"


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False, keep_models: bool = False,
        callback=None, arms=None, tasks=TASKS) -> dict:
    """-> {"rows": [{design, pretrained, R@1 t->i, R@5 t->i, R@1 i->t, R@5 i->t, VQA}],
    "arms": {arm: {"VQA accuracy", "R@5"}}, "items": {arm: {metric: per-item scores}},
    "floors": {"majority answer", "chance retrieval"}, "parameters": {design: count}, "grounding": {design: share}};
    ``keep_models`` adds "models": {design: the pre-trained model} (for pictures);
    ``callback(arm, phase, step)`` is called after every training step (phase "pre-training",
    "retrieval" or "VQA"); ``arms`` (arm names) and ``tasks`` run only those arms and tasks (each
    is independent of the others given the seed, so they may run as separate processes; a row
    then holds only its tasks' metrics)."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    every = [(d, p) for d in DESIGNS for p in (False, True)]
    chosen = every if arms is None else [(d, p) for d, p in every if arm_name(d, p) in arms]
    if arms is not None and len(chosen) != len(set(arms)):
        raise ValueError(f"arms must be some of {[arm_name(d, p) for d, p in every]}, got {arms!r}")
    if not tasks or not set(tasks) <= set(TASKS):
        raise ValueError(f"tasks must be some of {TASKS}, got {tasks!r}")
    b = BUDGETS[budget]
    pairs = ts.matching_pairs(b["pairs"], seed=seed)
    rng = np.random.default_rng(seed + 1)
    test_scenes = [ts.make_scene(rng) for _ in range(b["candidates"])]
    test_caps = [ts.caption(s, rng)[0] for s in test_scenes]
    train_scenes = [s for s, _, _ in pairs]
    vqa_scenes = [ts.make_scene(rng) for _ in range(b["questions"])]
    vqa_test, vqa_answers = _vqa(vqa_scenes, np.random.default_rng(seed + 2))
    rows, arms, items, params, ground, kept = [], {}, {}, {}, {}, {}
    for design, pretrained in chosen:
        arm = arm_name(design, pretrained)
        hook = (lambda phase: None) if callback is None else \
            (lambda phase: lambda step, record: callback(arm, phase, step))
        model = build(design, seed)
        params[design] = model.num_parameters()
        if pretrained:
            _fit(model, _pretrain_batches(pairs), b["pretrain"], seed, progress, hook("pre-training"))
            ground[design] = grounding(model, test_scenes, np.random.default_rng(seed + 3))
        state = model.state_dict()
        if pretrained and keep_models:
            kept[design] = build(design, seed)
            kept[design].load_state_dict(state)
        steps = b["finetune"] if pretrained else b["pretrain"] + b["finetune"]     # equal total steps
        row, arms[arm], items[arm] = {"design": design, "pretrained": pretrained}, {}, {}
        if "retrieval" in tasks:
            _fit(model, _itm_batches(pairs), steps, seed, progress, hook("retrieval"))
            s = match_scores(model, test_scenes, test_caps)
            row.update({"R@1 text->image": recall(s, 1), "R@5 text->image": recall(s, 5),
                        "R@1 image->text": recall(s.T, 1), "R@5 image->text": recall(s.T, 5)})
            items[arm]["R@5"] = (hits(s, 5) + hits(s.T, 5).astype(float)) / 2        # (candidates,) caption i, scene i
        if "VQA" in tasks:
            model.load_state_dict(state)
            _fit(model, _vqa_batches(train_scenes), steps, seed, progress, hook("VQA"))
            with eval_mode(model):
                model(*vqa_test, answers=vqa_answers)
            items[arm]["VQA accuracy"] = (model.heads.scores["vqa"].argmax(1) == vqa_answers).astype(float)
            row["VQA accuracy"] = float(items[arm]["VQA accuracy"].mean())
        arms[arm] = {metric: float(v.mean()) for metric, v in items[arm].items()}
        rows.append(row)
    majority = float(np.bincount(vqa_answers).max() / len(vqa_answers))
    out = {"rows": rows, "arms": arms, "items": items,
           "floors": {"majority answer": majority, "chance retrieval": 5 / b["candidates"]},
           "parameters": params, "grounding": ground, "budget": budget,
           "chance": {"R@1": 1 / b["candidates"], "R@5": 5 / b["candidates"], "VQA (majority answer)": majority}}
    return {**out, "models": kept} if keep_models else out
