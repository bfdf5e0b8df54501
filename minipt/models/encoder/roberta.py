"""RoBERTa (Liu, Ott, Goyal, Du, Joshi, Chen, Levy, Lewis, Zettlemoyer & Stoyanov 2019,
"RoBERTa: A Robustly Optimized BERT Pretraining Approach").

The architecture is BERT's (``bert.py``); what changes is the training (section 4):
- **MLM only**: no NSP loss and no pooler (section 4.2, table 2: removing NSP matches or
  helps), so ``nsp=False``;
- **dynamic masking** (section 4.1): a new mask every time a sequence is fed, not one mask
  fixed at preprocessing (the data module's choice; ``experiments/bert_variants.py``
  measures both);
- **full sentences** packed across document boundaries up to the maximum length;
- **byte-level BPE** (section 4.4, GPT-2's): ``RobertaTokenizer`` below, the byte-level
  BPE of ``tokenizers/byte_bpe.py`` with RoBERTa's special tokens first, so that
  ``<s>`` = 0 (the [CLS] role), ``<pad>`` = 1, ``</s>`` = 2 (the [SEP] role), ``<unk>`` = 3,
  ``<mask>`` = 4 (RoBERTa's released vocabulary has ``<mask>`` last);
- larger batches and more data (presets).

Positions: RoBERTa's released code (fairseq's ``make_positions``, as transformers) keeps
row ``padding_idx`` of the position table for padding and numbers the real tokens of each
row from ``padding_idx + 1`` = 2 on, counting the ids that are not ``<pad>``; so
``position_offset`` = ``pad_token_id + 1`` and ``BertEmbeddings.position_ids`` counts. A
left-padded row gives its first real token position 2, as a right-padded one does, and a
padding slot reads row 1. One segment: ``type_vocab_size`` 1.

Parameters: as BERT's (``bert.py``) without ``pooler.*`` and ``nsp.*``;
``embeddings.position_embeddings.weight`` is (P, C) with P = max_length + pad_token_id + 1.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...core.checks import check_positive_int
from ...recipes.encoder import PRESETS, EncoderHooks, encoder_recipe
from ...tokenizers import special
from ...tokenizers.byte_bpe import ByteBPETokenizer
from ..protocol import IGNORE
from ..registry import ModelEntry, register
from .bert import TINY, BertConfig, BertForPreTraining, perturbed

BOS, PAD, EOS, UNK, MASK_TOKEN = "<s>", "<pad>", "</s>", "<unk>", "<mask>"
SPECIALS = (BOS, PAD, EOS, UNK, MASK_TOKEN)          # ids 0..4


class RobertaTokenizer(ByteBPETokenizer):
    """Byte-level BPE with ``<s> <pad> </s> <unk> <mask>`` as ids 0..4."""
    specials_first = True

    def __init__(self, specials=SPECIALS) -> None:
        super().__init__(specials)


def byte_bpe_tokenizer(docs: list[list[list[str]]], vocab_size: int) -> RobertaTokenizer:
    """The recipe's tokenizer: byte-level BPE in RoBERTa's id layout under the special
    strings the data module reads ([CLS] = 0 as <s>, [PAD] = 1, [SEP] = 2, [UNK] = 3,
    [MASK] = 4), with ``vocab_size`` - 261 merges learned on the words. The corpus encodes
    word by word, so merges are learned on bare words (one per line), not on GPT-2's
    space-prefixed chunks."""
    merges = check_positive_int("vocab_size - 261 (merges)", vocab_size - 256 - len(SPECIALS))
    words = "\n".join(w for doc in docs for sentence in doc for w in sentence)
    return RobertaTokenizer((special.CLS, special.PAD, special.SEP, special.UNK, special.MASK)).fit(words, merges)


@dataclass
class RobertaConfig(BertConfig):
    nsp: bool = False
    type_vocab_size: int = 1
    pad_token_id: int = 1
    position_offset: int = 2            # pad_token_id + 1
    eps: float = 1e-5

    def __post_init__(self) -> None:
        check_positive_int("pad_token_id", self.pad_token_id, minimum=0)
        if self.position_offset != self.pad_token_id + 1:
            raise ValueError(f"RoBERTa numbers positions from pad_token_id + 1 = {self.pad_token_id + 1}, "
                             f"got position_offset {self.position_offset}")
        if self.nsp:
            raise ValueError("RoBERTa has no NSP head (MLM only); nsp must be False")
        if self.pad_token_id >= self.vocab_size:
            raise ValueError(f"pad_token_id {self.pad_token_id} is outside the vocabulary of {self.vocab_size}")
        super().__post_init__()


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> BertForPreTraining:
    return BertForPreTraining(RobertaConfig(**settings), rng=rng, dtype=dtype, name="roberta")


# -- registry entry -------------------------------------------------------------------
ROBERTA_TINY = {**TINY, "max_position": 10}           # 8 real positions after the offset 2
S, P, E, M = 0, 1, 2, 4                               # <s>, <pad>, </s>, <mask>


def tiny_batch() -> tuple[np.ndarray, ...]:
    """Packed full sentences ``<s> ... </s>`` (2, 7), the second right-padded, MLM labels only."""
    ids = np.array([[S, 5, M, 7, E, 8, E], [S, 9, M, 6, E, P, P]])
    segments = np.zeros_like(ids)
    mask = (ids != P).astype(np.int64)
    mlm = np.full(ids.shape, IGNORE)
    mlm[0, 2], mlm[0, 5], mlm[1, 2] = 5, 8, 10
    return ids, segments, mask, mlm


def tiny() -> tuple[BertForPreTraining, tuple]:
    return perturbed(build(rng=np.random.default_rng(0), dtype=np.float64, **ROBERTA_TINY)), tiny_batch()


_bert = PRESETS["toy"]
ROBERTA_PRESETS = {   # BERT's toy run with RoBERTa's changes: packed, MLM only, byte-level BPE, batch x2 at lr x1.5
    "toy": replace(_bert, model={**_bert.model, "pad_token_id": 1, "position_offset": 2}, batch_size=64,
                   train={**_bert.train, "steps": 300, "lr": 3e-3, "min_lr": 3e-4, "warmup": 30, "eval_every": 50},
                   data={**_bert.data, "vocab_size": 400},
                   expected="masked-token accuracy 0.335 (most-frequent-token baseline 0.104); validation loss "
                            "2.337; byte-level BPE vocabulary 400; 300 steps of 64, 431 s on a shared 2-core machine "
                            "at load 20"),
}

register(ModelEntry(
    name="roberta", title="RoBERTa", paper="Liu et al. 2019, RoBERTa: A Robustly Optimized BERT Pretraining "
    "Approach", objective="MLM (dynamic masking)", build=build, tiny=tiny, lesson="16_bert_variants",
    presets=ROBERTA_PRESETS, recipe=encoder_recipe(EncoderHooks(mode="packed", sentence_task=None,
                                                                tokenizer=byte_bpe_tokenizer)),
    language_model=False, verbs=("fill", "embed")))
