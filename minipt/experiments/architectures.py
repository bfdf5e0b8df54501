"""Architectures side by side (Raffel et al. 2020, T5, Sec. 3.2, Table 2; seed 001's table),
at toy scale: each pre-trained with its natural objective on the text-to-text tasks'
plain texts (packed to ``piece`` tokens, ``objectives/spans.pack_pieces``), then
fine-tuned on the text-to-text mixture on a fresh schedule and optimiser state
(``experiments/protocol.py``) and scored on held-out pairs (greedy answers,
``text_to_text.score``). Same pre-training and fine-tuning steps and batch for all.

| architecture | model | pre-training | how it answers |
|---|---|---|---|
| encoder-decoder | ``Transformer`` 2 + 2 layers | span corruption 15 %, spans of 3 | decoder, greedy |
| shared encoder-decoder | the same, decoder blocks tied to the encoder's (cross-attention not shared) | as above | as above |
| decoder-only LM | ``PrefixLM`` with prefix 0 (GPT-2), 4 layers | causal LM | ``input [SEP]`` continued greedily |
| prefix LM | ``PrefixLM``, 4 layers, the input fully visible | prefix LM | as the LM |
| encoder-only | ``BertForPreTraining`` (no NSP), 4 layers | MLM 15 % | ``input [SEP]`` + 24 ``[MASK]`` slots filled in ONE pass, cut at the first ``</s>`` |

Parameters: the encoder-decoder has P (2 encoder and 2 decoder blocks), the 4-layer
single stacks a little less (no cross-attention), the shared one 0.59 P at the quick
budget (T5's "shared encoder-decoder" has about half; here the embedding table and the
cross-attention are not shared), with the same compute. Compute per example:
the encoder-decoder and the shared one run each input token through 2 blocks and each
target token through 2; the single stacks run every token through 4 (T5's "decoder-only
with 2L layers", twice the FLOPs per token).
"""
from __future__ import annotations

import numpy as np

from ..data import text_to_text as t2t
from ..inference.seq2seq_decoding import greedy
from ..models.decoder.gpt import GPTConfig
from ..models.encoder.bert import BertConfig, BertForPreTraining
from ..models.protocol import IGNORE
from ..models.seq2seq.transformer import Transformer, TransformerConfig
from ..models.unified.prefix_lm import PrefixLM
from ..objectives.mlm import mask_tokens
from ..objectives.spans import pack_pieces
from ..objectives.t5_span import span_corruption
from ..objectives.unified import prefix_lm
from ..tokenizers.special import BOS, EOS, MASK, PAD, SEP, t5_sentinels
from ..train import train
from .objectives import N_SENTINELS, SETTINGS, objective_batch
from .protocol import Budget

ARCHITECTURES = ("encoder-decoder", "shared encoder-decoder", "decoder-only LM", "prefix LM", "encoder-only")
SMALL, TOY = dict(d_model=16, n_head=2, layers=1), dict(d_model=64, n_head=4, layers=2)
BUDGETS = {"tiny": dict(pretrain=2, finetune=2, sizes=(40, 4, 2), seeds=(0,), piece=40, model=SMALL),  # seconds
           "quick": dict(pretrain=200, finetune=250, sizes=(1000, 50, 50), seeds=(0,), piece=40, model=TOY),
           "full": dict(pretrain=600, finetune=600, sizes=(2000, 100, 200), seeds=(0, 1, 2), piece=40, model=TOY)}
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
    if arch in ("decoder-only LM", "prefix LM"):
        return PrefixLM(GPTConfig.gpt2(vocab_size=V, block_size=BLOCK, n_layer=2 * L, n_head=H, d_model=C),
                        rng=rng, name=arch)
    if arch == "encoder-only":
        return BertForPreTraining(BertConfig(vocab_size=V, max_position=BLOCK, n_layer=2 * L, n_head=H, d_model=C,
                                             d_ff=4 * C, dropout=0.0, nsp=False), rng=rng, name=arch)
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
        if self.arch == "encoder-only":
            specials = list(self.id.values()) + self.sentinels
            x, y = mask_tokens(ids, rng, mask_id=self.id[MASK], vocab_size=self.tok.vocab_size, special_ids=specials)
            return x, None, None, y
        if self.arch == "decoder-only LM":
            return ids[:, :-1], ids[:, 1:], 0
        rows = [prefix_lm(r, rng) for r in ids]                                 # (x, y, mask) per row
        return (np.stack([x for x, _, _ in rows]), np.stack([y for _, y, _ in rows]),
                np.array([int(np.sum(y == IGNORE)) + 1 for _, y, _ in rows]))

    def finetune(self, pairs: list[dict]):
        """The mixture's pairs in a single stack's layout (see the module docstring)."""
        enc = [self.tok.encode(e["input"]) + [self.id[SEP]] for e in pairs]
        tgt = [self.tok.encode(e["target"]) + [self.id[EOS]] for e in pairs]
        if self.arch == "encoder-only":
            x = _rows([s + [self.id[MASK]] * MAX_TARGET for s in enc], self.id[PAD])
            y = _rows([[IGNORE] * len(s) + t for s, t in zip(enc, tgt)], IGNORE)
            y = np.pad(y, ((0, 0), (0, x.shape[1] - y.shape[1])), constant_values=IGNORE)
            return x, None, (x != self.id[PAD]).astype(np.int64), y
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
    if arch == "encoder-only":                                                  # all slots in one pass
        x = _rows([s + [b.id[MASK]] * MAX_TARGET for s in enc], b.id[PAD])
        _, logits = model(x, None, (x != b.id[PAD]).astype(np.int64))          # (B, T, V)
        return [cut(np.argmax(logits[i, len(s):len(s) + MAX_TARGET], axis=-1).tolist()) for i, s in enumerate(enc)]
    lens = np.array([len(s) for s in enc])
    buf = _rows(enc, b.id[PAD])
    buf = np.pad(buf, ((0, 0), (0, MAX_TARGET)), constant_values=b.id[PAD])   # (B, longest + MAX_TARGET)
    prefix = lens if arch == "prefix LM" else 0
    for t in range(MAX_TARGET):                                                 # right padding stays unseen:
        _, logits = model(buf[:, :lens.max() + t], None, prefix)                # causal after each row's end
        nxt = np.argmax(logits[np.arange(len(enc)), lens + t - 1], axis=-1)     # (B,)
        buf[np.arange(len(enc)), lens + t] = nxt
    return [cut(buf[i, lens[i]:lens[i] + MAX_TARGET].tolist()) for i in range(len(enc))]


def scores(arch: str, model, tok, pairs: list[dict], batch: int = 50) -> dict[str, float]:
    """{task: held-out score} of greedy answers (``text_to_text.score``), in eval mode."""
    from ..core.module import eval_mode
    preds: dict[str, tuple[list, list]] = {}
    with eval_mode(model):
        for i in range(0, len(pairs), batch):
            chunk = pairs[i:i + batch]
            for e, ids in zip(chunk, answer(arch, model, tok, [e["input"] for e in chunk])):
                p, r = preds.setdefault(e["task"], ([], []))
                p.append(t2t.answer_text(tok, ids))
                r.append(e["target"])
    return {task: t2t.score(task, p, r) for task, (p, r) in preds.items()}


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True) -> dict:
    """-> {"rows": [{"architecture", "mean score", <task scores>, "parameters"}], ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    data = t2t.text_to_text(b["sizes"], seed=seed)
    tok = t2t.build_tokenizer(data, (SEP, MASK, *t5_sentinels(N_SENTINELS)))
    test = [e for t in data.values() for e in t["test"]]
    rows = []
    for arch in ARCHITECTURES:
        results = []
        for s in b["seeds"]:
            model = build(arch, tok, b["model"], np.random.default_rng(100 + s))
            batches = Batches(arch, tok, data, b["pretrain"], b["piece"])
            config = Budget(b["pretrain"], b["finetune"], BATCH).train_config(**SETTINGS, seed=seed + s,
                                                                             progress=progress)
            train(model, batches, config, callback=batches.callback)
            results.append(scores(arch, model, tok, test))
        row = {"architecture": arch,
               "mean score": float(np.mean([np.mean(list(r.values())) for r in results]))}
        row.update({task: float(np.mean([r[task] for r in results])) for task in data})
        row["parameters"] = int(model.num_parameters())
        rows.append(row)
    return {"rows": rows, "budget": budget, "pretrain steps": b["pretrain"], "finetune steps": b["finetune"],
            "batch": BATCH, "seeds": len(b["seeds"]), "test pairs per task": b["sizes"][2]}
