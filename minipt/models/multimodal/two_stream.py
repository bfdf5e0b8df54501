"""A two-stream vision-language Transformer: a text stream and a region stream, joined by
co-attention layers (ViLBERT, Lu et al. 2019; LXMERT, Tan & Bansal 2019).

    t = TextStack(BertEmbeddings(words))             (n_text_layer post-LN layers)
    r = RegionStack(RegionEmbedding(features, boxes)) (n_region_layer layers; 0: none)
    for each co-attention layer:                       (n_cross_layer)
        t', r' = TextBlock(t, memory=r), RegionBlock(r, memory=t)

Each co-attention block is a decoder-style block with cross-attention: self-attention,
then attention whose queries come from its own stream and whose keys and values come
from the other stream, then the FFN (LXMERT's cross-modality layer orders them cross,
self, FFN; ViLBERT's co-TRM has no self-attention in the same block). Both blocks of a
layer read the other stream as it was before the layer, so the exchange is symmetric.
Backward sends each block's memory gradient to the other stream.

The heads are the single stream's (``pretraining_heads.py``), on the text stream's
states and the region stream's states.

| parameter | shape | what |
|---|---|---|
| text.*, regions.* | as in single_stream.py (regions without a segment vector) | inputs |
| text_stack.blocks.i.*, region_stack.blocks.i.* | as TransformerBlock | single-modality layers |
| cross.i.text_block.*, cross.i.region_block.* | as TransformerBlock with ln_cross, cross_attn | co-attention |
| heads.* | as VisionLanguageHeads | MLM, MRC, MRFR, ITM, VQA |
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from ...core.module import Module
from ...nn.block import TransformerBlock
from ...nn.stack import TransformerStack
from ..encoder.bert import BertEmbeddings
from ..registry import ModelEntry, Preset, register
from .pretraining_heads import VisionLanguageHeads
from .regions import RegionEmbedding
from .single_stream import VLConfig, check_inputs, tiny_batch, tiny_model


class CoAttentionLayer(Module):
    def __init__(self, block: dict):
        super().__init__()
        self.text_block = TransformerBlock(**block, cross_attention=True)
        self.region_block = TransformerBlock(**block, cross_attention=True)

    def forward(self, t, r, t_keys, r_keys):
        """t (B, T, C), r (B, N, C), key masks (B, 1, T), (B, 1, N) -> (t', r')."""
        t_new = self.text_block(t, r, mask=t_keys, memory_mask=r_keys)     # words look at regions
        r_new = self.region_block(r, t, mask=r_keys, memory_mask=t_keys)   # regions look at words
        return t_new, r_new

    def backward(self, dt, dr):
        gt, gr = self.text_block.backward(dt), self.region_block.backward(dr)
        return gt.dx + gr.dmemory, gr.dx + gt.dmemory


class TwoStream(Module):
    has_backward = True

    def __init__(self, config: VLConfig, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        c = self.config = config
        block = c.block(rng, dtype)
        self.text = BertEmbeddings(c.text(), rng=rng, dtype=dtype)
        self.regions = RegionEmbedding(c.n_features, c.d_model, rng=rng, eps=c.eps, dtype=dtype)
        self.text_stack = TransformerStack(c.n_text_layer, **block)
        self.region_stack = TransformerStack(c.n_region_layer, **block) if c.n_region_layer else None
        self.cross = [CoAttentionLayer(block) for _ in range(c.n_cross_layer)]
        self.heads = VisionLanguageHeads(c.d_model, c.vocab_size, c.n_features, c.n_categories, c.n_answers,
                                         rng=rng, tied_to=self.text.word_embeddings, eps=c.eps, dtype=dtype)

    @property
    def block_size(self) -> int:
        return self.config.max_text

    def new_cache(self) -> None:
        return None

    def spec(self) -> dict:
        return {"model": "vilbert", **asdict(self.config)}

    def encode(self, ids, text_mask, features, boxes, region_mask) -> tuple[np.ndarray, np.ndarray]:
        """-> (h_text (B, T, C), h_regions (B, N, C))."""
        check_inputs(self.config, ids, text_mask, features, boxes, region_mask)
        t_keys = np.asarray(text_mask).astype(bool)[:, None, :]            # (B, 1, T)
        r_keys = np.asarray(region_mask).astype(bool)[:, None, :]          # (B, 1, N)
        t = self.text_stack(self.text(ids, np.zeros_like(ids)), mask=t_keys)   # (B, T, C)
        r = self.regions(features, boxes)                                  # (B, N, C)
        if self.region_stack is not None:
            r = self.region_stack(r, mask=r_keys)
        for layer in self.cross:
            t, r = layer(t, r, t_keys, r_keys)
        return t, r

    def forward(self, ids, text_mask, features, boxes, region_mask, mlm_labels=None, region_labels=None,
                feature_targets=None, itm_labels=None, answers=None):
        h_text, h_regions = self.encode(ids, text_mask, features, boxes, region_mask)
        return self.heads(h_text, h_regions, mlm_labels, region_labels, feature_targets, itm_labels, answers)

    def backward(self, dloss: float = 1.0):
        """-> (d features (B, N, F), d boxes (B, N, 4), d feature_targets or None)."""
        dt, dr, dtargets = self.heads.backward(dloss)
        for layer in reversed(self.cross):
            dt, dr = layer.backward(dt, dr)
        if self.region_stack is not None:
            dr = self.region_stack.backward(dr).dx
        dfeatures, dboxes = self.regions.backward(dr)
        self.text.backward(self.text_stack.backward(dt).dx)
        return dfeatures, dboxes, dtargets


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> TwoStream:
    return TwoStream(VLConfig(**settings), rng=rng, dtype=dtype)


def tiny():
    return tiny_model(TwoStream, n_text_layer=1, n_region_layer=1, n_cross_layer=1), tuple(tiny_batch())


register(ModelEntry(
    name="vilbert", title="Two-stream VL Transformer (ViLBERT / LXMERT)",
    paper="Lu et al. 2019, ViLBERT; Tan & Bansal 2019, LXMERT", objective="MLM + MRC + MRFR + ITM",
    build=build, tiny=tiny, lesson="26_multimodal", language_model=False, recipe="minipt.recipes.knowledge.recipe",
    presets={"toy": Preset(model=dict(n_text_layer=1, n_region_layer=0, n_cross_layer=1),
                           train=dict(steps=1500, lr=1e-3, min_lr=1e-4, warmup=150, weight_decay=0.01, eval_every=0),
                           batch_size=32, data=dict(pairs=8000), expected="image-text matching 0.906 (chance 0.5), masked-region category 0.446 (6 categories), masked word 0.694; 114 s (busy machine)")}))
