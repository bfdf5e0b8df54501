"""minipt's ELECTRA <-> transformers' ``ElectraForPreTraining`` (the discriminator) and
``ElectraForMaskedLM`` (the generator) (Clark et al. 2020, ``electra``).

minipt's ``Electra`` holds both networks, sharing one set of embeddings; transformers (like
Google's release: electra-small-generator, electra-small-discriminator) keeps each in a
folder of its own. ``save_pretrained`` therefore writes a *pair folder*:

    FOLDER/discriminator/   config.json + model.safetensors   (ElectraForPreTraining)
    FOLDER/generator/       config.json + model.safetensors   (ElectraForMaskedLM)

and ``from_pretrained(FOLDER)`` reads one back. Tensor names (minipt's on the right):

    electra.embeddings.*               (V, E), (P, E), (2, E), (E,)   discriminator.embeddings.* (both folders)
    electra.embeddings_project.*       (H, E), (H,)    discriminator/ or generator/ .embedding_projection.*
    electra.encoder.layer.i.*                          discriminator/ or generator/ .stack.blocks.i.* (as BERT's)
    discriminator_predictions.dense.*  (H, H)          discriminator_head.dense.*
    discriminator_predictions.dense_prediction.* (1, H)  discriminator_head.dense_prediction.*
    generator_predictions.dense.*      (E, H_G)        generator_head.dense.*
    generator_predictions.LayerNorm.*  (E,)            generator_head.ln.*
    generator_lm_head.bias             (V,)            generator_head.bias (its weight is the word embedding)

- **Shared embeddings.** Both folders hold the embeddings; minipt has one copy, so on
  loading the two must be equal (a pair whose embeddings differ is refused by name).
  ``entries`` names every tensor ``discriminator/<name>`` or ``generator/<name>``
  (``their_named`` gives the shared gradient under both).
- ``embeddings_project`` exists where E differs from that network's hidden size.
- **Options.** Each ``config.json`` as BERT's (``bert_layout.read_encoder_config``), with
  ``embedding_size`` E; ``hidden_act`` must be "gelu" (transformers' generator head applies
  exact GELU whatever ``hidden_act`` says; minipt's heads use the encoder's activation).
  ``vocab_size``, ``max_position_embeddings``, ``type_vocab_size``, ``embedding_size``,
  ``layer_norm_eps`` and the dropout rate must agree between the two folders. The
  ``summary_*`` options belong to sequence-classification heads and are ignored. lambda
  (``disc_weight``) and ``sample_seed`` are minipt training settings that no
  transformers class holds: a loaded model has the defaults.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..models.encoder.bert import BertConfig
from ..models.encoder.electra import Electra, ElectraConfig
from .bert_layout import encoder_config_to_hf, layer_entries, read_encoder_config
from .hf_config import CONFIG as CONFIG_JSON
from .hf_config import get_int, read_config
from .layout import Entry, from_theirs, to_theirs

MODEL_TYPE = "electra"
ARCHITECTURE = "ElectraForPreTraining"
GENERATOR = "ElectraForMaskedLM"
PARTS = {"discriminator": ARCHITECTURE, "generator": GENERATOR}
PREFIX = "electra."
CONFIG = ElectraConfig
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
_SHARED = ("discriminator/electra.embeddings.", "generator/electra.embeddings.")


def _network(config: BertConfig, mp: str) -> list[Entry]:
    """Embedding projection and layers of one network, transformers names without the part."""
    table = []
    if config.embedding_size is not None:
        table += [Entry(f"electra.embeddings_project.{k}", f"{mp}.embedding_projection.{k}") for k in ("weight", "bias")]
    for i in range(config.n_layer):
        table += layer_entries(i, f"electra.encoder.layer.{i}.", f"{mp}.stack.blocks.{i}.")
    return table


def part_entries(config: ElectraConfig, part: str) -> list[Entry]:
    """The table of one folder (``part`` "discriminator" or "generator"), names as in its file."""
    table = [Entry(f"electra.embeddings.{n}.weight", f"discriminator.embeddings.{n}.weight")
             for n in ("word_embeddings", "position_embeddings", "token_type_embeddings")]
    table += [Entry(f"electra.embeddings.LayerNorm.{k}", f"discriminator.embeddings.ln.{k}") for k in ("weight", "bias")]
    if part == "discriminator":
        table += _network(config.discriminator_config(), "discriminator")
        for k in ("weight", "bias"):
            table += [Entry(f"discriminator_predictions.dense.{k}", f"discriminator_head.dense.{k}"),
                      Entry(f"discriminator_predictions.dense_prediction.{k}", f"discriminator_head.dense_prediction.{k}")]
    else:
        table += _network(config.generator_config(), "generator")
        for k in ("weight", "bias"):
            table += [Entry(f"generator_predictions.dense.{k}", f"generator_head.dense.{k}"),
                      Entry(f"generator_predictions.LayerNorm.{k}", f"generator_head.ln.{k}")]
        table.append(Entry("generator_lm_head.bias", "generator_head.bias"))
    return table


def entries(config: ElectraConfig) -> list[Entry]:
    """Both folders' tables, each name prefixed by its folder (``discriminator/...``)."""
    return [Entry(f"{part}/{e.theirs}", e.ours, e.how, e.part, e.parts) for part in PARTS
            for e in part_entries(config, part)]


def build(config: ElectraConfig, rng, dtype) -> Electra:
    return Electra(config, rng=rng, dtype=dtype)


def is_buffer(name: str) -> bool:
    return name.endswith(_BUFFERS)


def export_problem(config) -> str | None:
    if not isinstance(config, ElectraConfig):
        return f"{type(config).__name__}: ElectraForPreTraining / ElectraForMaskedLM hold minipt's ELECTRA only"
    if config.activation != "gelu":
        return f"activation={config.activation!r}: transformers' ELECTRA generator head applies exact GELU ('gelu')"
    return None


def config_from_hf(hf: dict) -> ElectraConfig:
    raise ValueError("config.json: this folder holds one half of ELECTRA (model_type 'electra'); minipt's ELECTRA "
                     "is the generator and the discriminator together: pass the folder that holds generator/ and "
                     "discriminator/ (as save_pretrained writes it); an ElectraForMaskedLM or ElectraModel folder "
                     "alone loads as a masked LM (electra_mlm_layout.py)")


def _part_config(hf: dict, part: str) -> BertConfig:
    if "embedding_size" not in hf:
        hf = {**hf, "embedding_size": 128}                         # transformers' ElectraConfig default
    E = get_int(hf, "embedding_size")
    c = read_encoder_config(hf, (PARTS[part], "ElectraModel"), activations=("gelu",), nsp=False)
    c.embedding_size = None if E == c.d_model else E
    return c


def config_from_pair(disc_hf: dict, gen_hf: dict) -> ElectraConfig:
    """The two folders' ``config.json`` dictionaries -> minipt's ``ElectraConfig``."""
    d, g = _part_config(disc_hf, "discriminator"), _part_config(gen_hf, "generator")
    E = lambda c: c.d_model if c.embedding_size is None else c.embedding_size
    for field, a, b in (("vocab_size", d.vocab_size, g.vocab_size), ("max_position_embeddings", d.max_position,
                        g.max_position), ("type_vocab_size", d.type_vocab_size, g.type_vocab_size),
                        ("embedding_size", E(d), E(g)), ("layer_norm_eps", d.eps, g.eps),
                        ("hidden_dropout_prob", d.dropout, g.dropout)):
        if a != b:
            raise ValueError(f"config.json: {field} is {a!r} in discriminator/ but {b!r} in generator/; minipt's "
                             "ELECTRA shares embeddings and these settings between the two")
    return ElectraConfig(vocab_size=d.vocab_size, max_position=d.max_position, type_vocab_size=d.type_vocab_size,
                         n_layer=d.n_layer, n_head=d.n_head, d_model=d.d_model, d_ff=d.d_ff,
                         embedding_size=d.embedding_size, generator_d_model=g.d_model, generator_n_head=g.n_head,
                         generator_d_ff=g.d_ff, generator_n_layer=None if g.n_layer == d.n_layer else g.n_layer,
                         dropout=d.dropout, eps=d.eps, activation=d.activation)


def _config_to_hf(c: BertConfig, E: int, part: str, dtype: str) -> dict:
    return {"architectures": [PARTS[part]], "model_type": MODEL_TYPE, **encoder_config_to_hf(c, dtype),
            "embedding_size": E, "pad_token_id": 0}


def parts(model: Electra, dtype: str) -> dict[str, tuple[dict, dict]]:
    """{"discriminator": (tensors, config.json), "generator": (...)} for ``save_pretrained``."""
    c = model.config
    tensors = to_theirs(entries(c), model.parameters())
    out = {}
    for part, config in (("discriminator", c.discriminator_config()), ("generator", c.generator_config())):
        mine = {n[len(part) + 1:]: t for n, t in tensors.items() if n.startswith(part + "/")}
        out[part] = (mine, _config_to_hf(config, c.embed_dim, part, dtype))
    return out


def is_pair_folder(folder: Path) -> bool:
    return not (folder / CONFIG_JSON).exists() and all((folder / p / CONFIG_JSON).is_file() for p in PARTS)


def from_pair_folder(folder: Path, dtype=None) -> Electra:
    """minipt's ``Electra`` from FOLDER/discriminator + FOLDER/generator (see the docstring)."""
    from .pretrained import _pick_dtype, layout_index, read_checked
    hf = {p: read_config(folder / p) for p in PARTS}
    for p, cfg in hf.items():
        if cfg["model_type"] != MODEL_TYPE:
            raise ValueError(f"{folder / p / CONFIG_JSON}: model_type {cfg['model_type']!r}; an ELECTRA pair folder "
                             f"holds two model_type 'electra' folders")
    try:
        config = config_from_pair(hf["discriminator"], hf["generator"])
    except ValueError as e:
        raise ValueError(f"{folder}: {str(e).removeprefix('config.json: ')}") from None
    index = {p: layout_index(folder / p, sys.modules[__name__]) for p in PARTS}
    model = build(config, np.random.default_rng(0), _pick_dtype(dtype, {**index["discriminator"], **index["generator"]}))
    shapes = {n: p.shape for n, p in model.named_parameters()}
    arrays = {}
    stored = {}
    for p in PARTS:
        table = part_entries(config, p)
        copies = {"generator_lm_head.weight": "electra.embeddings.word_embeddings.weight"} if p == "generator" else {}
        stored[p] = read_checked(folder / p, index[p], table, {e.ours: shapes[e.ours] for e in table}, copies,
                                 PARTS[p])
        arrays.update(from_theirs(table, stored[p], model.dtype))
    for name in stored["discriminator"]:
        if name.startswith("electra.embeddings.") and \
                not np.array_equal(stored["discriminator"][name], stored["generator"][name]):
            raise ValueError(f"{folder}: {name} differs between discriminator/ and generator/; minipt's ELECTRA "
                             "shares one set of embeddings between the two networks")
    model.load_state_dict(arrays)
    return model
