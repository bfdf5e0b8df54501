"""Inference with a masked LM (BERT, Devlin et al. 2019, section 3.1; RoBERTa, ALBERT,
ELECTRA's generator): fill the ``[MASK]`` tokens of a text, and sentence embeddings.

**Fill-mask.** The text is read as ``[CLS] words [SEP]`` (one segment), encoded word by
word as the pre-training corpus was (``data/encoder_corpus.encode_documents``). At every
masked position t the MLM head's scores z_t (V,) give

    p(v | text) = exp(z_tv) / sum_u exp(z_tu),

and the k most probable v are listed with their probability and the text with that
mask filled (other masks left as they are), as transformers' ``fill-mask`` pipeline
does. A text without the mask token is an error; a text longer than the context keeps
its first ``block_size - 2`` word pieces (a note says so) and masks past them are an
error.

**Embeddings.** e = normalise(sum_t m_t h_t / sum_t m_t), the mean of the last hidden
states h (T, C) of ``[CLS] words [SEP]`` over its tokens (Reimers & Gurevych 2019's mean
pooling), L2-normalised so that dot products are cosine similarities. ELECTRA embeds with
its discriminator (the network kept after pre-training) and fills with its generator.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.module import eval_mode
from ..tokenizers.special import special_pattern, split_on_specials
from .prompts import kept_note, unknown_note, unknown_words

MASK_TOKENS = ("[MASK]", "<mask>")
BOUNDS = (("[CLS]", "[SEP]"), ("<s>", "</s>"))          # BERT's and RoBERTa's sequence ends


def folder_tokenizer(folder, model):
    """The tokenizer of a transformers folder for a masked LM: ``vocab.txt`` (WordPiece,
    lower-cased unless ``tokenizer_config.json`` says ``do_lower_case: false``) or minipt's
    ``minipt_tokenizer.json``; its size must fit the model's vocabulary."""
    import json
    from pathlib import Path

    from ..tokenizers.base import Tokenizer
    from ..tokenizers.wordpiece import WordPieceTokenizer
    folder = Path(folder)
    if (folder / "vocab.txt").is_file():
        config = folder / "tokenizer_config.json"
        try:
            lower = json.loads(config.read_text(encoding="utf-8")).get("do_lower_case", True) \
                if config.is_file() else True
        except (ValueError, UnicodeDecodeError, AttributeError) as e:
            raise ValueError(f"{config} is damaged: not a JSON object ({e})") from None
        tok = WordPieceTokenizer.from_vocab_file(folder / "vocab.txt", lowercase=bool(lower))
    elif (folder / "minipt_tokenizer.json").is_file():
        tok = Tokenizer.load(folder / "minipt_tokenizer.json")
    else:
        raise FileNotFoundError(f"{folder} has no vocab.txt (nor minipt_tokenizer.json): reading text needs the "
                                "vocabulary the model was trained with")
    if tok.vocab_size > model.config.vocab_size:
        raise ValueError(f"{folder}: the tokenizer has {tok.vocab_size} tokens but the model's vocab_size is "
                         f"{model.config.vocab_size}: they do not belong together")
    return tok


def _networks(model):
    """(encoder that fills, its MLM head, encoder that embeds) of a BERT-family model."""
    if hasattr(model, "generator_head"):                 # ELECTRA: generator fills, discriminator embeds
        return model.generator, model.generator_head, model.discriminator
    return model.encoder, model.mlm, model.encoder


def _special(tok, names) -> str | None:
    return next((t for t in names if t in tok.special_tokens), None)


@dataclass
class Read:
    """A text as the model reads it: ids (T,) with [CLS] and [SEP], the span each input
    word's pieces take, and the notes (unknown words, truncation) for the user."""
    ids: np.ndarray
    words: list[tuple[str, list[int]]]
    notes: list[str]


def read_text(tok, text: str, block_size: int | None) -> Read:
    """Encode ``text`` word by word (special tokens such as ``[MASK]`` kept whole) inside
    ``[CLS] ... [SEP]``, cut to ``block_size``; an empty text is a ValueError."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the text is empty: give at least one word")
    specials = tok.special_tokens
    words: list[tuple[str, list[int]]] = []
    for _, piece, sid in split_on_specials(text, special_pattern(specials), specials):
        if sid is not None:
            words.append((tok.id_to_token(sid), [sid]))
        else:
            words += [(w, tok.encode(w, allow_special=False)) for w in piece.split()]
    notes = [n for n in [unknown_note(tok, unknown_words(tok, text))] if n]
    pieces = [i for _, ids in words for i in ids]
    bounds = next(((tok.token_to_id(a), tok.token_to_id(b)) for a, b in BOUNDS if a in specials and b in specials),
                  None)
    room = None if block_size is None else block_size - (2 if bounds else 0)
    if room is not None and len(pieces) > room:
        notes.append(kept_note(room, len(pieces), context=block_size))
        pieces = pieces[:room]
    ids = [bounds[0], *pieces, bounds[1]] if bounds else pieces
    return Read(np.asarray(ids, dtype=np.int64), words, notes)


@dataclass
class Filler:
    token: str            # the filler as the vocabulary spells it
    token_id: int
    probability: float    # softmax of the MLM scores at the mask
    sequence: str         # the text with this mask filled


def fill_mask(model, tok, text: str, top_k: int = 5) -> tuple[list[list[Filler]], list[str]]:
    """The ``top_k`` fillers of every mask of ``text``, most probable first, and the notes."""
    mask = _special(tok, MASK_TOKENS)
    if mask is None:
        raise ValueError("this tokenizer has no mask token ([MASK] or <mask>), so there is nothing to fill")
    read = read_text(tok, text, model.block_size)
    mask_id = tok.token_to_id(mask)
    total = sum(ids == [mask_id] for _, ids in read.words)
    if total == 0:
        raise ValueError(f"the text has no {mask} token: write {mask} where a word is to be filled in, "
                         f'e.g. "the {mask} sleeps ."')
    at = np.flatnonzero(read.ids == mask_id)                                  # (M,) positions kept
    if len(at) < total:
        raise ValueError(f"{total - len(at)} of the {total} {mask} tokens lie past the {model.block_size} tokens "
                         "the model reads; shorten the text")
    encoder, head, _ = _networks(model)
    with eval_mode(model):
        z = head(encoder(read.ids[None, :]))[0, at].astype(np.float64)       # (M, V) MLM scores
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)                                         # (M, V) softmax
    out = []
    for m, row in enumerate(p):
        best = np.argsort(-row, kind="stable")[:top_k]
        out.append([Filler(tok.id_to_token(int(v)), int(v), float(row[v]), _filled(tok, read.words, mask_id, m, int(v)))
                    for v in best])
    return out, read.notes


def _filled(tok, words, mask_id: int, which: int, filler: int) -> str:
    """The text (as the tokenizer spells it) with mask number ``which`` replaced by ``filler``."""
    parts, seen = [], 0
    for _, ids in words:
        if ids == [mask_id]:
            parts.append(tok.decode([filler]) if seen == which else tok.id_to_token(mask_id))
            seen += 1
        else:
            parts.append(tok.decode(ids))
    return " ".join(parts)


def embed_texts(model, tok, texts: list[str]) -> tuple[np.ndarray, list[str]]:
    """(N, C) unit-length mean-pooled embeddings of ``texts`` and the notes."""
    if isinstance(texts, str) or not texts:
        raise ValueError("give at least one text to embed")
    _, _, encoder = _networks(model)
    rows, notes = [], []
    with eval_mode(model):
        for n, text in enumerate(texts, 1):
            if not text.strip():
                raise ValueError(f"text {n} is empty: give at least one word")
            read = read_text(tok, text, model.block_size)
            notes += [f"text {n}: {note}" if len(texts) > 1 else note for note in read.notes]
            h = encoder(read.ids[None, :])[0]                                 # (T, C)
            e = h.mean(axis=0)                                                # (C,) mean over the tokens
            rows.append(e / max(float(np.linalg.norm(e)), 1e-12))
    return np.stack(rows), notes


def sentence_encoder_notes(encoder, texts: list[str]) -> list[str]:
    """The notes for ``texts`` read by a sentence-transformers ``SentenceEncoder``
    (``interop/sentence_embeddings.py``): unknown words, and truncation to its
    ``max_seq_length``; an empty text is a ValueError."""
    notes = []
    for n, text in enumerate(texts, 1):
        if not text.strip():
            raise ValueError(f"text {n} is empty: give at least one word")
        pieces, room = len(encoder.tokenizer.encode(text)), encoder.max_seq_length - 2
        found = [unknown_note(encoder.tokenizer, unknown_words(encoder.tokenizer, text)),
                 pieces > room and kept_note(room, pieces, context=encoder.max_seq_length)]
        notes += [f"text {n}: {x}" if len(texts) > 1 else x for x in found if x]
    return notes
