"""Recipes behind ``minipt train unilm``, ``minipt train prefixlm`` and ``minipt train glm``:
word-level pre-training on the toy language (nothing downloaded), then a report measured
against what the language makes true.

- ``unilm``: pairs (A, B) where B picks up A's subject (``toy_text_tasks.reply_about``);
  each example draws its mode from UniLM's mix; bidirectional rows get NSP (half of
  them with a random B). Reported on held-out pairs: cloze accuracy per mode and NSP
  accuracy; then fine-tuning for generation (seq2seq mask, target tokens masked) on the
  toy translation task and greedy, KV-cached decoding of its test sources: exact match
  and token accuracy. ``--steps`` sets the steps of both stages. NSP stays near chance
  here (0.54 after the preset's 600 steps, 0.50 after 800 bidirectional-only steps):
  telling whether B is about A's subject is a same-word test the 2-layer toy model does
  not pick up in that time.
- ``prefixlm``: windows of the toy word stream, each with a uniform split point
  (``objectives.unified.prefix_lm``): the prefix fully visible, loss on the rest.
  Reported: the loss on held-out windows with their prefixes, and the same windows read
  left to right (no prefix).
- ``glm``: toy sentences with spans blanked (``objectives.permutation.glm_blank_infilling``).
  Reported: the held-out loss, and how often greedy blank filling of held-out sentences
  gives a sentence the toy language can produce (oracle probability > 0), against
  random words of the same lengths.

The run folder holds ``run.json`` (preset, steps, seed: ``--resume`` takes them from
there), ``checkpoint.npz``, ``metrics.jsonl``, ``loss.png`` and ``report.json``, as the
knowledge recipes (``recipes/knowledge.py``); the held-out evaluation runs only on a
finished run. ``--corpus`` does not apply (the reports need the toy language's truth).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..core.module import eval_mode
from ..models.registry import Preset
from ..objectives.common import IGNORE
from ..train import TrainConfig, train
from .run_folder import train_generated

PAD, SOS, EOS, MASK, START, END = "[PAD]", "[SOS]", "[EOS]", "[MASK]", "[START]", "[END]"

UNILM_PRESETS = {
    "toy": Preset(model=dict(max_position=32, n_layer=2, n_head=4, d_model=64, d_ff=256, dropout=0.0,
                             activation="gelu_tanh"),
                  batch_size=32, train=dict(steps=600, lr=2e-3, min_lr=2e-4, warmup=50, weight_decay=0.01,
                                            eval_every=100, eval_batches=4, grad_clip=1.0),
                  data=dict(pairs=4000, mask_prob=0.15, finetune_steps=400, finetune_mask_prob=0.5,
                            task_sizes=(2000, 100, 200)),
                  expected="held-out cloze accuracy bidirectional 0.446, seq2seq 0.397, left-to-right 0.380, "
                           "right-to-left 0.390; NSP 0.539; toy translation after 400 fine-tuning steps: exact "
                           "match 0.060, token accuracy 0.692; 24 s of CPU on one core (274 s wall at load 18)"),
}

PREFIX_PRESETS = {
    "toy": Preset(model=dict(block_size=32, n_layer=2, n_head=4, d_model=64), batch_size=32,
                  train=dict(steps=600, lr=3e-3, min_lr=3e-4, warmup=50, weight_decay=0.1, eval_every=100,
                             eval_batches=4, grad_clip=1.0),
                  data=dict(n_words=100_000, block_size=32),
                  expected="held-out loss after the prefix 1.784 nats/word (validation 1.770), the same windows "
                           "read left to right 1.784; 14 s of CPU on one core (100 s wall on a machine at load 17)"),
}
GLM_PRESETS = {
    "toy": Preset(model=dict(max_position=32, n_layer=2, n_head=4, d_model=64, activation="gelu_tanh"), batch_size=32,
                  train=dict(steps=800, lr=2e-3, min_lr=2e-4, warmup=50, weight_decay=0.01, eval_every=100,
                             eval_batches=4, grad_clip=1.0),
                  data=dict(sentences=4000, ratio=0.15, held_out=300),
                  expected="blank fills the toy language can say 0.950 of 300 held-out sentences (random words "
                           "of the right lengths 0.027), exact 0.163; validation 1.321 nats per Part B token; "
                           "10 s of CPU on one core (125 s wall on a machine at load 19)"),
}

# -- vocabulary and padding ----------------------------------------------------------------
@lru_cache(maxsize=1)
def tokenizer():
    """Word ids for the toy language, its translation's words and the specials of UniLM
    ([SOS], [EOS], [MASK]) and GLM ([START], [END]); ``[PAD]`` is id 0."""
    from ..data.toy_grammar import END_WORD
    from ..data.toy_tasks import language
    from ..data.toy_text_tasks import lexicon
    from ..tokenizers.word import WordTokenizer
    words = [w for w in language().vocab if w != END_WORD] + sorted(set(lexicon().values()))
    return WordTokenizer(specials=[PAD, SOS, EOS, MASK, START, END]).fit(" ".join(dict.fromkeys(words)))


def ids(words) -> np.ndarray:
    text = words if isinstance(words, str) else " ".join(words)
    return tokenizer().encode_array(text).astype(np.int64)


def pad_batch(rows: list[dict], keys: tuple[str, ...]) -> list[np.ndarray]:
    """Examples of different lengths -> one array per key: 1-D entries padded at the end
    (ids with [PAD] = 0, ``targets`` with IGNORE), (N, N) masks with False (padding is
    never seen and sees nothing), (2, N) positions with 0."""
    N = max(len(r["ids"]) for r in rows)
    out = []
    for key in keys:
        first = np.asarray(rows[0][key])
        if first.ndim == 2 and first.shape[0] == first.shape[1]:                # a mask (N_i, N_i)
            arr = np.zeros((len(rows), N, N), dtype=bool)
            for b, r in enumerate(rows):
                n = len(r["ids"])
                arr[b, :n, :n] = r[key]
        else:
            fill = IGNORE if key == "targets" else 0
            arr = np.full((len(rows),) + first.shape[:-1] + (N,), fill, dtype=np.int64)
            for b, r in enumerate(rows):
                v = np.asarray(r[key])
                arr[b, ..., :v.shape[-1]] = v
        out.append(arr)
    return out


# -- UniLM ----------------------------------------------------------------------------------
def reply_pairs(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(A, B) sentence pairs: B is a new sentence about A's subject."""
    from ..data.toy_tasks import sentence
    from ..data.toy_text_tasks import reply_about
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        a = sentence(rng)
        pairs.append((ids(a[0]), ids(reply_about(*a, rng)[0])))
    return pairs


def unilm_batch(pairs, rng: np.random.Generator, B: int, mask_prob: float, mode: str | None = None):
    """(ids, segments, mask (B, N, N), mlm_labels, nsp_labels) from B random pairs, each
    with a drawn mode (or ``mode``); bidirectional rows carry NSP, half of them NotNext,
    whose B is the reply of another pair."""
    from ..objectives.unified import unilm_example, unilm_mode
    tok = tokenizer()
    sp = {k: tok.token_to_id(t) for k, t in (("sos_id", SOS), ("eos_id", EOS), ("mask_id", MASK))}
    rows, nsp = [], []
    for k in rng.integers(0, len(pairs), B):
        m = mode or unilm_mode(rng)
        a, b = pairs[k]
        label = IGNORE
        if m == "bidirectional":
            label = int(rng.random() < 0.5)
            if not label:                                        # another pair's reply, never its own
                if len(pairs) < 2:
                    raise ValueError("UniLM's NSP needs at least two pairs to draw a NotNext reply from another")
                j = int(rng.integers(len(pairs) - 1))
                b = pairs[j + (j >= k)][1]
        rows.append(unilm_example(a, b, rng, **sp, vocab_size=tok.vocab_size, special_ids=(0,),
                                  mask_prob=mask_prob, mode=m))
        nsp.append(label)
    return (*pad_batch(rows, ("ids", "segments", "mask", "targets")), np.array(nsp))


def _accuracy(logits: np.ndarray, targets: np.ndarray) -> float:
    keep = targets != IGNORE
    return float((logits.argmax(-1)[keep] == targets[keep]).mean()) if keep.any() else float("nan")


def cloze_by_mode(model, pairs, seed: int, n: int = 256, mask_prob: float = 0.15) -> dict:
    """Held-out cloze loss and accuracy per mode (the same pairs and masks in every mode)."""
    from ..objectives.unified import UNILM_MODES
    found = {}
    with eval_mode(model):
        for mode in UNILM_MODES:
            ids_, seg, mask, labels, _ = unilm_batch(pairs, np.random.default_rng(seed), n, mask_prob, mode)
            loss, logits = model(ids_, seg, mask, labels)
            found[mode] = {"loss": float(loss), "accuracy": _accuracy(logits, labels)}
    return found


def finetune_and_decode(model, p, seed: int, steps: int | None = None, progress: bool = False) -> dict:
    """Fine-tune for generation on the toy translation (``steps``, default the preset's),
    then decode its test sources greedily with the KV cache."""
    from ..data.toy_text_tasks import translation
    task = translation(sizes=tuple(p.data["task_sizes"]), seed=seed)
    pairs = [(ids(e["source"]), ids(e["target"])) for e in task.train]
    steps = steps or p.data["finetune_steps"]
    tc = TrainConfig(**{**p.train, "steps": steps, "warmup": steps // 10, "eval_every": 0}, seed=seed,
                     progress=progress)
    mp = p.data["finetune_mask_prob"]
    train(model, lambda split, rng: unilm_batch(pairs, rng, p.batch_size, mp, "seq2seq")[:4], tc)
    tok = tokenizer()
    sp = dict(sos_id=tok.token_to_id(SOS), eos_id=tok.token_to_id(EOS), mask_id=tok.token_to_id(MASK))
    exact = right = total = 0
    for e in task.test:
        want, source = list(ids(e["target"])), ids(e["source"])
        room = model.block_size - len(source) - 3                          # [SOS] S [EOS] ... [MASK]
        got = model.generate(source, **sp, max_len=min(len(want) + 4, room))
        exact += got == want
        right += sum(g == w for g, w in zip(got, want))
        total += len(want)
    return {"exact match": exact / len(task.test), "token accuracy": right / total}


def _unilm(entry, p, seed, steps=None):
    pairs = reply_pairs(p.data["pairs"], seed)
    held = reply_pairs(500, seed + 1000)
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=tokenizer().vocab_size, **p.model)

    def get(split, rng):
        return unilm_batch(pairs if split == "train" else held, rng, p.batch_size, p.data["mask_prob"])

    def evaluate(model):
        found = {}
        for mode, r in cloze_by_mode(model, held, seed + 1, mask_prob=p.data["mask_prob"]).items():
            found[f"cloze accuracy {mode}"] = r["accuracy"]
        ids_, seg, mask, labels, nsp = unilm_batch(held, np.random.default_rng(seed + 2), 256, 0.15, "bidirectional")
        with eval_mode(model):
            found["NSP accuracy"] = float((model.nsp_logits(model.encode(ids_, seg, mask)).argmax(-1) == nsp).mean())
        found.update({f"translation {k}": v for k, v in finetune_and_decode(model, p, seed, steps).items()})
        return [f"{k} {v:.3f}" for k, v in found.items()], found
    return model, get, evaluate, f"{len(pairs)} toy sentence pairs (the second about the first's subject)"


# -- prefix LM ------------------------------------------------------------------------------
def word_stream(n_words: int, seed: int) -> np.ndarray:
    """Ids of ``n_words`` words of the toy language (document ends dropped)."""
    from ..data.toy_grammar import END_WORD
    from ..data.toy_tasks import language
    words = language().sample_words(n_words, np.random.default_rng(seed))
    return ids([w for w in words if w != END_WORD])


def prefix_batch(stream: np.ndarray, rng: np.random.Generator, B: int, T: int):
    """(idx, targets, prefix_len) for B random windows of T + 1 words, each split at a
    uniform point (``objectives.unified.prefix_lm``): no loss on the prefix."""
    from ..objectives.unified import prefix_lm
    starts = rng.integers(0, len(stream) - T - 1, B)
    made = [prefix_lm(stream[s:s + T + 1], rng) for s in starts]
    prefix_len = np.array([int(m[2][0].sum()) for m in made])             # what position 0 sees: the prefix
    return np.stack([m[0] for m in made]), np.stack([m[1] for m in made]), prefix_len


def _prefixlm(entry, p, seed, steps=None):
    T = p.data["block_size"]
    train_ids, val_ids = word_stream(p.data["n_words"], seed), word_stream(p.data["n_words"] // 10, seed + 1000)
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=tokenizer().vocab_size, **p.model)

    def get(split, rng):
        return prefix_batch(train_ids if split == "train" else val_ids, rng, p.batch_size, T)

    def evaluate(model):
        idx, targets, prefix_len = prefix_batch(val_ids, np.random.default_rng(seed + 2), 256, T)
        with eval_mode(model):
            found = {"held-out loss after the prefix (nats/word)": float(model(idx, targets, prefix_len)[0]),
                     "the same positions read left to right": float(model(idx, targets, 0)[0])}
        return [f"{k} {v:.3f}" for k, v in found.items()], found
    return model, get, evaluate, f"{len(train_ids):,} words of the toy language, windows of {T}"


# -- GLM --------------------------------------------------------------------------------------
def glm_batch(sentences, rng: np.random.Generator, B: int, ratio: float):
    """(ids, positions (B, 2, N), mask (B, N, N), targets) for B random sentences."""
    from ..objectives.permutation import glm_blank_infilling
    sp = special_ids()
    rows = [glm_blank_infilling(sentences[k], rng, mask_id=sp["mask_id"], start_id=sp["start_id"],
                                end_id=sp["end_id"], ratio=ratio) for k in rng.integers(0, len(sentences), B)]
    return tuple(pad_batch(rows, ("ids", "positions", "mask", "targets")))


def special_ids() -> dict:
    tok = tokenizer()
    return {k: tok.token_to_id(t) for k, t in (("mask_id", MASK), ("start_id", START), ("end_id", END))}


def toy_sentences(n: int, seed: int) -> list[list[str]]:
    from ..data.toy_tasks import language
    rng = np.random.default_rng(seed)
    return [language().sample_sentence(rng)[0] for _ in range(n)]


def fill_rates(model, sentences: list[list[str]], seed: int, ratio: float) -> dict:
    """Blank each sentence as in training, fill the blanks greedily, and count the filled
    sentences the toy language can produce (oracle probability > 0); the same for random
    words of the true spans' lengths, and for exact recovery of the removed words."""
    from ..data.toy_tasks import language
    from ..objectives.permutation import glm_blank_infilling
    lang, tok, sp, rng = language(), tokenizer(), special_ids(), np.random.default_rng(seed)
    from ..data.toy_grammar import END_WORD
    words = [w for w in lang.vocab if w != END_WORD]
    ok = ok_random = exact = 0
    for sent in sentences:
        ex = glm_blank_infilling(ids(sent), rng, ratio=ratio, **sp)
        part_a = ex["ids"][:ex["n_a"]]
        truth = spans_in_order(ex)
        spans = model.fill(part_a, **sp, max_span=max(len(s) for s in truth) + 3)
        guess = [list(rng.choice(words, len(s))) for s in truth]
        ok += grammatical(lang, tok, part_a, spans, sp["mask_id"])
        ok_random += grammatical(lang, tok, part_a, [ids(g).tolist() for g in guess], sp["mask_id"])
        exact += spans == truth
    n = len(sentences)
    return {"grammatical fills": ok / n, "grammatical random fills": ok_random / n, "exact fills": exact / n}


def spans_in_order(ex) -> list[list[int]]:
    """The removed spans of a blank-infilling example, in the order of their blanks."""
    n_a, ids_, pos = ex["n_a"], ex["ids"], ex["positions"]
    by_blank: dict[int, list[int]] = {}
    for k in range(n_a, len(ids_)):
        if pos[1, k] > 1:                                               # a span token (not its [START])
            by_blank.setdefault(int(pos[0, k]), []).append(int(ids_[k]))
        else:
            by_blank.setdefault(int(pos[0, k]), [])
    return [by_blank[m] for m in sorted(by_blank)]


def grammatical(lang, tok, part_a, spans, mask_id: int) -> bool:
    """Part A with its blanks replaced by ``spans``: can the toy language say it?"""
    out, k = [], 0
    for t in part_a:
        if t == mask_id:
            out += list(spans[k])
            k += 1
        else:
            out.append(int(t))
    words = [tok.id_to_token(i) for i in out]
    if any(w not in lang.vocab for w in words) or not words:
        return False
    return bool(np.isfinite(lang.log_prob(words)))


def _glm(entry, p, seed, steps=None):
    sentences = [ids(s) for s in toy_sentences(p.data["sentences"], seed)]
    held_words = toy_sentences(p.data["held_out"], seed + 1000)
    held = [ids(s) for s in held_words]
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=tokenizer().vocab_size, **p.model)

    def get(split, rng):
        return glm_batch(sentences if split == "train" else held, rng, p.batch_size, p.data["ratio"])

    def evaluate(model):
        found = fill_rates(model, held_words, seed + 2, p.data["ratio"])
        return [f"{k} {v:.3f}" for k, v in found.items()], found
    return model, get, evaluate, f"{len(sentences)} toy sentences, {p.data['ratio']:.0%} of the words blanked"


MAKERS = {"unilm": _unilm, "prefixlm": _prefixlm, "glm": _glm}


def train_unified(entry, preset: str | None = None, **options) -> dict:
    return train_generated(entry, MAKERS[entry.name], preset,
                           why_no_corpus="trains on the toy language, whose truth the report needs", **options)
