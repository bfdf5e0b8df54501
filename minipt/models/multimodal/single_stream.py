"""A single-stream vision-language Transformer: one encoder over words and image regions
together (VisualBERT, Li et al. 2019; Unicoder-VL, Li et al. 2020; VL-BERT, Su et al.
2020; UNITER, Chen et al. 2020).

The input is ``[CLS] caption [SEP]`` followed by the scene's regions:

    x = [ BertEmbeddings(words) ; RegionEmbedding(features, boxes) + image segment ]

and one post-LN BERT stack attends over all T + N positions (padding words and padding
regions masked as keys), so every layer mixes the two modalities. Pre-training and
fine-tuning heads are ``pretraining_heads.py``: MLM on the caption, masked region
classification and feature regression, image-text matching, VQA.

``forward`` takes a ``VLBatch`` (``objectives/vision_language.py``) and optionally the
VQA answers; ``backward`` returns the gradients of the batch's float inputs (region
features, boxes, feature targets), so a whole-model gradcheck covers them too.

| parameter | shape | what |
|---|---|---|
| text.* | as BertEmbeddings (V, C), (P, C), (1, C), LN | words |
| regions.* | as RegionEmbedding, with type_embedding (C,) | regions |
| encoder.blocks.i.* | as TransformerBlock (post-LN, GELU) | the one stream |
| heads.* | as VisionLanguageHeads | MLM, MRC, MRFR, ITM, VQA |
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ...core.module import Module
from ...data import toy_scenes as ts
from ...nn.stack import TransformerStack
from ..encoder.bert import BertConfig, BertEmbeddings
from ..registry import ModelEntry, Preset, register
from .pretraining_heads import VisionLanguageHeads
from .regions import RegionEmbedding


@dataclass
class VLConfig:
    """Settings shared by both designs; ``n_layer`` is the single stream's depth, the
    other three the two-stream model's (text, region and co-attention layers)."""
    vocab_size: int = 41
    max_text: int = 16
    n_features: int = ts.N_FEATURES
    n_categories: int = len(ts.CATEGORIES)
    n_answers: int = len(ts.answers())
    max_regions: int = ts.MAX_REGIONS
    d_model: int = 32
    n_head: int = 4
    d_ff: int = 64
    n_layer: int = 4
    n_text_layer: int = 1
    n_region_layer: int = 1
    n_cross_layer: int = 1
    dropout: float = 0.0
    eps: float = 1e-12

    def text(self) -> BertConfig:
        return BertConfig(vocab_size=self.vocab_size, max_position=self.max_text, type_vocab_size=1,
                          n_layer=1, n_head=self.n_head, d_model=self.d_model, d_ff=self.d_ff,
                          dropout=self.dropout, eps=self.eps)

    def block(self, rng: np.random.Generator, dtype) -> dict:
        return dict(d_model=self.d_model, n_heads=self.n_head, d_ff=self.d_ff, rng=rng, norm="layer",
                    prenorm=False, activation="gelu", dropout=self.dropout, eps=self.eps, dtype=dtype)


def check_inputs(config: VLConfig, ids, text_mask, features, boxes, region_mask) -> None:
    """Shapes that agree, text within max_text, regions within 1..max_regions, boxes
    inside the image: clear errors naming what is wrong."""
    B, T = np.shape(ids)
    if T > config.max_text:
        raise ValueError(f"ids: caption length {T} exceeds max_text {config.max_text}")
    if np.shape(text_mask) != (B, T):
        raise ValueError(f"text_mask: expected {(B, T)}, got {np.shape(text_mask)}")
    if features.ndim != 3 or features.shape[0] != B or features.shape[2] != config.n_features:
        raise ValueError(f"features: expected (B={B}, N, F={config.n_features}), got {features.shape}")
    N = features.shape[1]
    if not 1 <= N <= config.max_regions:
        raise ValueError(f"a scene needs 1 to {config.max_regions} regions, got {N}")
    if np.shape(region_mask) != (B, N) or not (np.asarray(region_mask).sum(1) > 0).all():
        raise ValueError(f"region_mask: expected {(B, N)} with at least one real region per scene")
    real = np.asarray(boxes)[np.asarray(region_mask) > 0]                  # (R, 4), padding left out
    if (real < 0).any() or (real > 1).any():
        raise ValueError("boxes must lie inside the image [0, 1]^2")


class SingleStream(Module):
    has_backward = True

    def __init__(self, config: VLConfig, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        c = self.config = config
        self.text = BertEmbeddings(c.text(), rng=rng, dtype=dtype)
        self.regions = RegionEmbedding(c.n_features, c.d_model, rng=rng, segment=True, eps=c.eps, dtype=dtype)
        self.encoder = TransformerStack(c.n_layer, **c.block(rng, dtype))
        self.heads = VisionLanguageHeads(c.d_model, c.vocab_size, c.n_features, c.n_categories, c.n_answers,
                                         rng=rng, tied_to=self.text.word_embeddings, eps=c.eps, dtype=dtype)
        self._T = None

    @property
    def block_size(self) -> int:
        return self.config.max_text

    def new_cache(self) -> None:
        return None

    def spec(self) -> dict:
        return {"model": "visualbert", **asdict(self.config)}

    def encode(self, ids, text_mask, features, boxes, region_mask) -> tuple[np.ndarray, np.ndarray]:
        """-> (h_text (B, T, C), h_regions (B, N, C))."""
        check_inputs(self.config, ids, text_mask, features, boxes, region_mask)
        T = ids.shape[1]
        x = np.concatenate([self.text(ids, np.zeros_like(ids)), self.regions(features, boxes)], 1)  # (B, T+N, C)
        keys = np.concatenate([np.asarray(text_mask), np.asarray(region_mask)], 1).astype(bool)[:, None, :]
        h = self.encoder(x, mask=keys)                                     # (B, T+N, C)
        self._T = T
        return h[:, :T], h[:, T:]

    def forward(self, ids, text_mask, features, boxes, region_mask, mlm_labels=None, region_labels=None,
                feature_targets=None, itm_labels=None, answers=None):
        h_text, h_regions = self.encode(ids, text_mask, features, boxes, region_mask)
        return self.heads(h_text, h_regions, mlm_labels, region_labels, feature_targets, itm_labels, answers)

    def backward(self, dloss: float = 1.0):
        """-> (d features (B, N, F), d boxes (B, N, 4), d feature_targets or None)."""
        dt, dr, dtargets = self.heads.backward(dloss)
        dx = self.encoder.backward(np.concatenate([dt, dr], 1)).dx         # (B, T+N, C)
        self.text.backward(dx[:, :self._T])
        dfeatures, dboxes = self.regions.backward(dx[:, self._T:])
        return dfeatures, dboxes, dtargets


def tiny_batch(seed: int = 0):
    """Two float64 pairs: a matched one with 3 regions and a mismatched one with 2 (so
    region padding is exercised), with every target present."""
    from ...objectives.vision_language import make_batch
    rng = np.random.default_rng(seed)
    first, second = ts.make_scene(rng, 3), ts.make_scene(rng, 2)
    while True:
        other, _ = ts.caption(ts.make_scene(rng), rng)
        if not ts.describes(second, other):
            break
    pairs = [(first, ts.caption(first, rng)[0], 1), (second, other, 0)]
    b = make_batch(pairs, rng, mask_prob=0.4, region_mask_prob=0.5)
    region_labels, mlm, features = b.region_labels.copy(), b.mlm_labels.copy(), b.features.copy()
    region_labels[0, 0], features[0, 0] = first.categories[0], 0.0        # at least one masked region
    boxes = 0.05 + 0.9 * b.boxes          # off the image's edges: a gradcheck nudges them both ways
    if (mlm == -100).all():
        mlm[0, 1] = b.ids[0, 1]
    return b._replace(features=features, boxes=boxes, region_labels=region_labels, mlm_labels=mlm)


def tiny_model(cls, **settings):
    from ...objectives.vision_language import vocabulary
    rng = np.random.default_rng(0)
    config = VLConfig(vocab_size=len(vocabulary()), d_model=8, n_head=2, d_ff=12, **settings)
    model = cls(config, rng=rng, dtype=np.float64)
    for _, p in model.named_parameters():
        p[...] += rng.normal(0, 0.3, p.shape)
    return model


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> SingleStream:
    return SingleStream(VLConfig(**settings), rng=rng, dtype=dtype)


def tiny():
    return tiny_model(SingleStream, n_layer=2), tuple(tiny_batch())


register(ModelEntry(
    name="visualbert", title="Single-stream VL Transformer (VisualBERT / UNITER)",
    paper="Li et al. 2019, VisualBERT; Chen et al. 2020, UNITER", objective="MLM + MRC + MRFR + ITM",
    build=build, tiny=tiny, lesson="26_multimodal", language_model=False, recipe="minipt.recipes.knowledge.recipe",
    presets={"toy": Preset(model=dict(n_layer=4),
                           train=dict(steps=1500, lr=1e-3, min_lr=1e-4, warmup=150, weight_decay=0.01, eval_every=0),
                           batch_size=32, data=dict(pairs=8000), expected="image-text matching 0.905 (chance 0.5), masked-region category 0.363 (6 categories), masked word 0.636; 114 s (busy machine)")}))
