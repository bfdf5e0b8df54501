"""One ELECTRA folder on its own (Clark et al. 2020, ``electra``): transformers'
``ElectraForMaskedLM`` (a generator, e.g. google/electra-small-generator) or ``ElectraModel``
(the encoder alone) <-> minipt's ``BertForPreTraining`` with no NSP head.

minipt's ``Electra`` is the generator and the discriminator together, read from a pair
folder (``electra_layout.py``); a single MLM folder is a BERT-style masked LM with ELECTRA's
factorised embedding, which ``BertConfig`` holds (``embedding_size`` E where E differs from
the hidden size, ``nsp=False``). Tensor names (minipt's on the right):

    electra.embeddings.*               (V, E), (P, E), (2, E), (E,)   encoder.embeddings.*
    electra.embeddings_project.*       (H, E), (H,)    encoder.embedding_projection.*  (only when E != H)
    electra.encoder.layer.i.*                          encoder.stack.blocks.i.*  (as BERT's)
    generator_predictions.dense.*      (E, H), (E,)    mlm.dense.*
    generator_predictions.LayerNorm.*  (E,)            mlm.ln.*
    generator_lm_head.bias             (V,)            mlm.bias (its weight is the word embedding)

An ``ElectraModel`` file (names without ``electra.``) has no generator head: it is left at
its initialisation and named in the loading note (``HEADS``, ``pretrained.py``). Options as
``electra_layout``'s (``hidden_act`` "gelu": transformers' generator head applies exact GELU).
An ``ElectraForPreTraining`` folder alone is a discriminator, refused by ``electra_layout``
(minipt's discriminator trains with its generator). Loading only: minipt saves its ELECTRA
as a pair folder.
"""
from __future__ import annotations

from ..models.encoder.bert import BertConfig, BertForPreTraining
from .bert_layout import encoder_entries, read_encoder_config
from .hf_config import get_int
from .layout import Entry

MODEL_TYPE = "electra"
ARCHITECTURE = "ElectraForMaskedLM"
ACCEPTED = (ARCHITECTURE, "ElectraModel")
PREFIX = "electra."
CONFIG = BertConfig
HEADS = {"MLM head": "generator_"}
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


def entries(config: BertConfig) -> list[Entry]:
    table = encoder_entries(config, hf=PREFIX)
    if config.embedding_size is not None:
        table += [Entry(f"electra.embeddings_project.{k}", f"encoder.embedding_projection.{k}")
                  for k in ("weight", "bias")]
    for k in ("weight", "bias"):
        table += [Entry(f"generator_predictions.dense.{k}", f"mlm.dense.{k}"),
                  Entry(f"generator_predictions.LayerNorm.{k}", f"mlm.ln.{k}")]
    table.append(Entry("generator_lm_head.bias", "mlm.bias"))
    return table


def tied_copies(config: BertConfig) -> dict[str, str]:
    return {"generator_lm_head.weight": "electra.embeddings.word_embeddings.weight"}


def build(config: BertConfig, rng, dtype) -> BertForPreTraining:
    return BertForPreTraining(config, rng=rng, dtype=dtype, name="bert")


def is_buffer(name: str) -> bool:
    return name.endswith(_BUFFERS)


def reads(hf: dict) -> bool:
    """Whether ``hf`` (an ``electra`` config.json) names one of this layout's classes."""
    archs = hf.get("architectures") or []
    return bool(archs) and all(a in ACCEPTED for a in archs)


def config_from_hf(hf: dict) -> BertConfig:
    """An ``ElectraConfig`` dictionary -> minipt's ``BertConfig`` (no NSP, E where E != H)."""
    E = get_int(hf, "embedding_size", 128)                     # transformers' ElectraConfig default
    same = E == get_int(hf, "hidden_size", 768)
    return read_encoder_config(hf, ACCEPTED, activations=("gelu",), nsp=False, embedding_size=None if same else E)
