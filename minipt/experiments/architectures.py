"""Architectures side by side (Raffel et al. 2020, T5, Sec. 3.2, Table 2), at toy scale:
each pre-trained with its natural objective on the text-to-text tasks' plain texts
(packed to ``piece`` tokens, ``objectives/spans.pack_pieces``), then fine-tuned on the
text-to-text mixture on a fresh schedule and optimiser state (``experiments/protocol.py``)
and scored on held-out pairs (greedy answers, ``text_to_text.score``). Same pre-training
and fine-tuning steps and batch for all, the same settings as ``objectives``.

| architecture | model | pre-training | how it answers |
|---|---|---|---|
| encoder-decoder | ``Transformer`` 2 + 2 layers | span corruption 15 %, spans of 3 | decoder, greedy |
| shared encoder-decoder | the same, decoder blocks tied to the encoder's (cross-attention not shared) | as above | as above |
| decoder-only | ``PrefixLM`` with prefix 0 (GPT-2), 4 layers | causal LM | ``input [SEP]`` continued greedily |
| prefix LM | ``PrefixLM``, 4 layers, the input fully visible | prefix LM | as the LM |

Parameters: the encoder-decoder has P (2 encoder and 2 decoder blocks), the 4-layer
single stacks a little less (no cross-attention), the shared one about 0.6 P (T5's
"shared encoder-decoder" has about half; here the embedding table and the
cross-attention are not shared). Compute per example: the encoder-decoder and the
shared one run each input token through 2 blocks and each target token through 2; the
single stacks run every token through 4 (T5's "decoder-only with 2L layers", twice the
FLOPs per token). T5's encoder-only model is left out, as in T5: it cannot generate.

Metric ``score``: the mean over the four tasks of the held-out score (``items``: one 0/1
per test pair, the tasks' equal-sized test splits together). Floor ``commonest answer``:
each task's commonest training answer given to every test input, averaged over tasks.
"""
from __future__ import annotations

import numpy as np

from ..data import text_to_text as t2t
from ..inference.seq2seq_decoding import greedy
from ..models.decoder.gpt import GPTConfig
from ..models.protocol import IGNORE
from ..models.seq2seq.transformer import Transformer, TransformerConfig
from ..models.unified.prefix_lm import PrefixLM
from ..objectives.spans import pack_pieces
from ..objectives.t5_span import span_corruption
from ..objectives.unified import prefix_lm
from ..recipes.seq2seq import majority_scores
from ..tokenizers.special import BOS, EOS, MASK, PAD, SEP, t5_sentinels
from ..train import train
from .objectives import N_SENTINELS, SETTINGS, check_only, objective_batch
from .protocol import Budget

ARCHITECTURES = ("encoder-decoder", "shared encoder-decoder", "decoder-only", "prefix LM")
SMALL, TOY = dict(d_model=16, n_head=2, layers=1), dict(d_model=64, n_head=4, layers=2)
BUDGETS = {"tiny": dict(pretrain=2, finetune=2, sizes=(40, 4, 2), piece=40, model=SMALL),     # seconds
           "quick": dict(pretrain=200, finetune=400, sizes=(2000, 100, 100), piece=40, model=TOY),
           "full": dict(pretrain=400, finetune=1000, sizes=(2000, 100, 200), piece=40, model=TOY)}
BATCH, MAX_SOURCE, MAX_TARGET = 32, 44, 24
BLOCK = MAX_SOURCE + 1 + MAX_TARGET + 1          # input [SEP] target </s>


def share_encoder_decoder(model: Transformer) -> Transformer:
    """Tie every decoder block's self-attention, feed-forward and norms to the encoder
    block of the same index (``Module.tie``: one array, gradients add up); cross-attention
    and its norm stay the decoder's own."""
    if len(model.encoder.blocks) != len(model.decoder.blocks):
        raise ValueError(f"sharing needs as many encoder as decoder blocks, got {len(model.encoder.blocks)} "
                         f"and {len(model.decoder.blocks)}")
    for enc, dec in zip(model.encoder.blocks, model.decoder.blocks):
        mods = dict(enc.named_modules())
        for name, mod in dec.named_modules():
            if name in mods and name.split(".")[0] in ("ln_1", "attn", "ln_2", "mlp"):
                for key in list(mod.params):
                    mod.tie(key, mods[name], key)
    return model


def build(arch: str, tok, m: dict, rng: np.random.Generator):
    """The architecture ``arch`` at sizes ``m`` (d_model, n_head, layers per side)."""
    V, C, H, L = tok.vocab_size, m["d_model"], m["n_head"], m["layers"]
    if arch in ("encoder-decoder", "shared encoder-decoder"):
        model = Transformer(TransformerConfig(vocab_size=V, pad_id=tok.token_to_id(PAD), n_encoder_layers=L,
                                              n_decoder_layers=L, n_head=H, d_model=C, prenorm=True,
                                              max_source_len=MAX_SOURCE, max_target_len=MAX_SOURCE), rng=rng)
        return share_encoder_decoder(model) if arch.startswith("shared") else model
    if arch in ("decoder-only", "prefix LM"):
        return PrefixLM(GPTConfig.gpt2(vocab_size=V, block_size=BLOCK, n_layer=2 * L, n_head=H, d_model=C),
                        rng=rng, name=arch)
    raise ValueError(f"unknown architecture {arch!r}; choose from {', '.join(ARCHITECTURES)}")


def _rows(seqs: list[list[int]], fill: int) -> np.ndarray:
    out = np.full((len(seqs), max(map(len, seqs))), fill, dtype=np.int64)      # (B, longest)
    for b, s in enumerate(seqs):
        out[b, :len(s)] = s
    return out


class Batches:
    """``get_batch(split, rng)`` for ``train``: ``pretrain`` steps of the architecture's
    objective, then the text-to-text mixture in its layout (``step`` kept by ``callback``)."""

    def __init__(self, arch: str, tok, data, pretrain: int, piece: int):
        self.arch, self.tok, self.pretrain, self.piece, self.step = arch, tok, pretrain, piece, 0
        self.mix = {s: t2t.Mixture({t: d[s] for t, d in data.items()}) for s in ("train", "val")}
        self.texts = {s: [t2t.plain_text(e["input"]) for t in data.values() for e in t[s]] for s in ("train", "val")}
        self.id = {s: tok.token_to_id(s) for s in (PAD, BOS, EOS, SEP, MASK)}
        self.sentinels = [tok.token_to_id(s) for s in t5_sentinels(N_SENTINELS)]

    def callback(self, step: int, record: dict) -> None:
        self.step = step

    def __call__(self, split: str, rng: np.random.Generator):
        pairs = None if self.step < self.pretrain else self.mix[split].sample(BATCH, rng)
        if self.arch.endswith("encoder-decoder"):
            if pairs is None:
                spans = lambda ids, r: span_corruption(ids, r, self.sentinels, 0.15, 3.0)
                return objective_batch(spans, self.piece, self.tok, self.texts[split], BATCH, rng)
            return t2t.encode_pairs(self.tok, pairs, MAX_SOURCE, MAX_TARGET)
        if pairs is None:
            pieces = [pack_pieces(self.texts[split], self.piece, rng, self.tok.encode) for _ in range(BATCH)]
            return self._pretrain(np.stack(pieces), rng)                        # (B, piece)
        return self.finetune(pairs)

    def _pretrain(self, ids: np.ndarray, rng):
        if self.arch == "decoder-only":
            return ids[:, :-1], ids[:, 1:], 0
        rows = [prefix_lm(r, rng) for r in ids]                                 # (x, y, mask) per row
        return (np.stack([x for x, _, _ in rows]), np.stack([y for _, y, _ in rows]),
                np.array([int(np.sum(y == IGNORE)) + 1 for _, y, _ in rows]))

    def finetune(self, pairs: list[dict]):
        """The mixture's pairs in a single stack's layout (see the module docstring)."""
        enc = [self.tok.encode(e["input"]) + [self.id[SEP]] for e in pairs]
        tgt = [self.tok.encode(e["target"]) + [self.id[EOS]] for e in pairs]
        seq = _rows([s + t for s, t in zip(enc, tgt)], self.id[PAD])
        y = _rows([[IGNORE] * (len(s) - 1) + t + [IGNORE] for s, t in zip(enc, tgt)], IGNORE)[:, :seq.shape[1]]
        prefix = np.array([len(s) for s in enc]) if self.arch == "prefix LM" else 0
        return seq[:, :-1], y[:, :-1], prefix


def answer(arch: str, model, tok, inputs: list[str]) -> list[list[int]]:
    """Greedy answer ids (``</s>`` and after dropped) for a list of prompts."""
    b = Batches.__new__(Batches)
    b.arch, b.tok, b.id = arch, tok, {s: tok.token_to_id(s) for s in (PAD, BOS, EOS, SEP, MASK)}
    eos = b.id[EOS]
    if arch.endswith("encoder-decoder"):
        return greedy(model, t2t.encode_sources(tok, inputs, MAX_SOURCE), start_id=b.id[BOS], eos_id=eos,
                      max_new_tokens=MAX_TARGET)
    cut = lambda ids: ids[:ids.index(eos)] if eos in ids else ids
    enc = [tok.encode(x) + [b.id[SEP]] for x in inputs]
    lens = np.array([len(s) for s in enc])
    buf = _rows(enc, b.id[PAD])
    buf = np.pad(buf, ((0, 0), (0, MAX_TARGET)), constant_values=b.id[PAD])   # (B, longest + MAX_TARGET)
    prefix = lens if arch == "prefix LM" else 0
    for t in range(MAX_TARGET):                                                 # right padding stays unseen:
        _, logits = model(buf[:, :lens.max() + t], None, prefix)                # causal after each row's end
        nxt = np.argmax(logits[np.arange(len(enc)), lens + t - 1], axis=-1)     # (B,)
        buf[np.arange(len(enc)), lens + t] = nxt
    return [cut(buf[i, lens[i]:lens[i] + MAX_TARGET].tolist()) for i in range(len(enc))]


def test_items(arch: str, model, tok, pairs: list[dict], batch: int = 50) -> np.ndarray:
    """One 0/1 exact-match score per held-out pair (greedy answers, ``text_to_text.score``),
    in the order of ``pairs``, in eval mode."""
    from ..core.module import eval_mode
    out = []
    with eval_mode(model):
        for i in range(0, len(pairs), batch):
            chunk = pairs[i:i + batch]
            for e, ids in zip(chunk, answer(arch, model, tok, [e["input"] for e in chunk])):
                out.append(t2t.score(e["task"], [t2t.answer_text(tok, ids)], [e["target"]]))
    return np.array(out)


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True, only=None) -> dict:
    """-> {"rows", "arms": {arch: {"score", <task scores>, "parameters"}}, "floors":
    {"commonest answer"}, "items": {arch: {"score"}}, ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    check_only(only, ARCHITECTURES)
    b = BUDGETS[budget]
    data = t2t.text_to_text(b["sizes"], seed=seed)
    tok = t2t.build_tokenizer(data, (SEP, MASK, *t5_sentinels(N_SENTINELS)))
    test = [e for t in data.values() for e in t["test"]]
    arms, items = {}, {}
    for arch in ARCHITECTURES:
        if only is not None and arch not in only:
            continue
        model = build(arch, tok, b["model"], np.random.default_rng(100 + seed))
        batches = Batches(arch, tok, data, b["pretrain"], b["piece"])
        config = Budget(b["pretrain"], b["finetune"], BATCH).train_config(**SETTINGS, seed=seed, progress=progress)
        train(model, batches, config, callback=batches.callback)
        scores = test_items(arch, model, tok, test)
        items[arch] = {"score": scores.tolist()}
        arms[arch] = {"score": float(scores.mean()), "parameters": int(model.num_parameters()),
                      **{task: float(np.mean([s for s, e in zip(scores, test) if e["task"] == task])) for task in data}}
    rows = [{"architecture": k, "mean score": v["score"], **{t: v[t] for t in data}, "parameters": v["parameters"]}
            for k, v in arms.items()]
    floors = {"commonest answer": float(np.mean(list(majority_scores(data).values())))}
    return {"rows": rows, "arms": arms, "floors": floors, "items": items, "budget": budget,
            "pretrain steps": b["pretrain"], "finetune steps": b["finetune"], "batch": BATCH,
            "test pairs per task": b["sizes"][2]}
