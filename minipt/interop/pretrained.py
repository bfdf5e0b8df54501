"""``save_pretrained`` / ``from_pretrained``: minipt GPTs as transformers folders.

A transformers model folder is ``config.json`` (hyper-parameters; ``model_type`` names
the architecture) plus ``model.safetensors`` (named tensors). minipt reads and writes
three layouts, chosen by ``model_type``:

- ``gpt2``  <-> ``GPT2LMHeadModel``  (``gpt2_layout.py``): GPT-2-style minipt models;
- ``llama`` <-> ``LlamaForCausalLM`` (``llama_layout.py``): LLaMA-style minipt models;
- ``openai-gpt`` <-> ``OpenAIGPTLMHeadModel`` (``openai_gpt_layout.py``): GPT-1 (post-LN).
- ``xlnet`` <-> ``XLNetLMHeadModel`` (``xlnet_layout.py``): minipt's XLNet (``models/unified/xlnet.py``),
  one of ``MODEL_LAYOUTS``, the layouts of models other than ``GPT``, found by config class
  (and, where several share one, by ``export_problem``);
- ``bert`` <-> ``BertForPreTraining`` (``bert_layout.py``): minipt's BERT (``models/encoder/bert.py``);
  ``roberta`` <-> ``RobertaForMaskedLM`` (``roberta_layout.py``), ``albert`` <-> ``AlbertForPreTraining``
  (``albert_layout.py``); ``electra`` <-> ``ElectraForPreTraining`` + ``ElectraForMaskedLM``
  (``electra_layout.py``): minipt's ELECTRA as a pair folder (discriminator/, generator/).
  A single ``ElectraForMaskedLM`` / ``ElectraModel`` folder loads as a BERT-style MLM (``electra_mlm_layout.py``).
- ``bart`` <-> ``BartForConditionalGeneration`` (``bart_layout.py``): minipt's BART (``models/seq2seq/bart.py``)
  and MASS; ``t5`` <-> ``T5ForConditionalGeneration`` (``t5_layout.py``); ``marian`` <->
  ``MarianMTModel`` (``marian_layout.py``): minipt's Vaswani Transformer, channels reordered.

Export is for the registry names in ``EXPORTABLE``; every other model (word2vec, the
n-gram, ELMo, the task heads, the prefix LM, ...) is refused in one line by ``layout_of``,
with the reason in ``NEAR_MISSES`` where a transformers class looks close. Shared code
asks the model only what the protocol offers (``spec()``, ``block_size``); the layouts
read their family's config.

On export each layout says whether it can hold the model's config (``export_problem``);
the first that can is used, so a config's shape (pre- or post-LN, norms, positions)
picks the family.

Loading checks before it reads any tensor: the config (an option minipt does not
implement is a ValueError naming it), then every tensor name and shape against the model
that config describes (a missing, extra or mis-shaped tensor is a ValueError naming it).
Nothing is unpickled and no code from the folder runs; a ``pytorch_model.bin`` is refused.

Folders as users find them: an encoder layout names its optional heads (``HEADS``: the MLM
head, pooler, NSP / SOP head, each a tensor-name prefix), so a ``BertModel``,
``BertForMaskedLM``, ``RobertaModel``, ``AlbertModel`` or ``AlbertForMaskedLM`` folder loads
into the family's pre-training model: a head stored in full is read, a head with no tensor
in the file keeps minipt's initialisation (seed 0), and one ``UserWarning`` names the heads
left so. A head stored in part is a missing tensor, as ever. ``UNUSED`` prefixes are
tensors a class stores that minipt's model has no place for (prefix -> why; RoBERTa's
pooler, which transformers' ``RobertaForMaskedLM`` drops too): they are skipped, and the
note says so. LayerNorm parameters under TensorFlow BERT's names (``LayerNorm.gamma`` /
``.beta``, as in bert-base-uncased's file) are read as ``.weight`` / ``.bias``, as transformers does.

Saving writes everything into a temporary folder beside the target first, so a failed
export leaves nothing behind. A new folder is then renamed into place at once; with
``overwrite=True`` an existing folder gets the new files one by one and loses only the
files an export writes (``export_files()``): anything else in it, subfolders included, is
kept, and no folder is ever deleted.

``their_named(model, ...)`` gives the model's parameters or gradients under the
transformers names, through the same tables, e.g. to compare gradients with PyTorch's.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from ..models.decoder.gpt import GPT, GPTConfig
from . import (
    albert_layout,
    bart_layout,
    bert_layout,
    electra_layout,
    electra_mlm_layout,
    gpt2_layout,
    llama_layout,
    marian_layout,
    openai_gpt_layout,
    roberta_layout,
    t5_layout,
    xlnet_layout,
)
from .hf_config import read_config, write_config
from .layout import from_theirs, their_shapes, to_theirs
from .safetensors_io import WEIGHTS, read_tensors, tensor_index, write_tensors

LAYOUTS = {m.MODEL_TYPE: m for m in (gpt2_layout, llama_layout, openai_gpt_layout)}
# Layouts of models other than ``GPT``: each names its minipt config class (CONFIG) and builds
# its model (``build(config, rng, dtype)``); a config of that class exports through it.
MODEL_LAYOUTS = {m.MODEL_TYPE: m for m in (xlnet_layout, bert_layout, roberta_layout, albert_layout,
                                              electra_layout, bart_layout, t5_layout, marian_layout)}
_DTYPES = {"float32": np.float32, "float64": np.float64}
MINIPT_TOKENIZER = "minipt_tokenizer.json"     # a non-BPE tokenizer, in minipt's own JSON


# Registry names (``model.spec()["model"]``) of the models a layout above holds; every other
# model is refused by ``layout_of``, with the reason below where a near transformers class exists.
EXPORTABLE = ("gpt", "gpt1", "gpt3", "dialogpt", "llama", "bert", "roberta", "albert", "electra", "t5", "bart",
              "mass", "xlnet", "transformer")
NEAR_MISSES = {
    "prefixlm": "GPT2LMHeadModel would attend causally inside the prefix, which the prefix LM sees whole",
    "unilm": "BertForPreTraining would compute only its bidirectional mask, not its left-to-right and seq2seq "
             "masks",
    "bert-classify": "minipt writes no layout for its task head", "bert-qa": "minipt writes no layout for its task "
    "head", "bert-tag": "minipt writes no layout for its task head",
    "gpt1-finetune": "minipt writes no layout for its task heads",
    "ernie": "transformers' 'ernie' is Baidu's ERNIE, another model, and it has none for Tsinghua's entity fusion",
    "glm": "transformers' 'glm' is GLM-4, another network, and it has none for the 2-D positions of blank infilling",
    "vilbert": "minipt writes no layout for its region features and co-attention",
    "visualbert": "minipt writes no layout for its region features",
}


def export_files() -> frozenset[str]:
    """The names an export may write: what ``overwrite=True`` replaces, and nothing else."""
    from ..tokenizers.gpt2_files import MERGES, TOKENIZER_CONFIG, TOKENIZER_JSON, VOCAB
    from ..tokenizers.hf_files import VOCAB_TXT
    from .hf_config import CONFIG
    return frozenset({CONFIG, WEIGHTS, MINIPT_TOKENIZER, VOCAB, MERGES, TOKENIZER_CONFIG, TOKENIZER_JSON, VOCAB_TXT})


def layout_of(model):
    """The layout module that holds ``model``, or a ValueError (one line) saying that its
    family has no Hugging Face layout, or why this config does not fit the family's."""
    from ..models import registry
    name = model.spec().get("model")
    if name not in EXPORTABLE:
        title = registry.get(name).title if name in registry._REGISTRY else type(model).__name__
        why = NEAR_MISSES.get(name, "transformers has no class that computes it")
        raise ValueError(f"{name} ({title}) has no Hugging Face layout: {why}. Exportable: {', '.join(EXPORTABLE)}")
    return layout_for(model.config)


def layout_for(config: GPTConfig):
    """The layout module that can hold ``config``, or a ValueError saying why none can."""
    family = {m: m.export_problem(config) for m in MODEL_LAYOUTS.values() if isinstance(config, m.CONFIG)}
    if family:
        for layout, problem in family.items():
            if problem is None:
                return layout
        raise ValueError(f"cannot export this model to transformers: {'; '.join(family.values())}")
    if config.sparse_window:
        problems = {None: f"sparse_window={config.sparse_window} (GPT-3's banded sparse layers): "
                          f"{', '.join(m.ARCHITECTURE for m in LAYOUTS.values())} attend densely in every layer, "
                          "so the exported model would compute something else"}
    else:
        problems = {layout: layout.export_problem(config) for layout in LAYOUTS.values()}
    for layout, problem in problems.items():
        if problem is None:
            return layout
    why = "; ".join(problems.values())
    raise ValueError(f"cannot export this model to transformers: {why}. Exportable are GPT-2-style configs "
                     "(GPTConfig.gpt2), LLaMA-style configs (llama_config) and GPT-1 (GPTConfig.gpt1)")


def their_named(model: GPT, which: str = "params") -> dict[str, np.ndarray]:
    """The model's parameters (``which="params"``) or gradients (``"grads"``) under the
    transformers tensor names of its layout (copies)."""
    arrays = model.parameters() if which == "params" else model.gradients()
    return to_theirs(layout_for(model.config).entries(model.config), arrays)


# -- saving ----------------------------------------------------------------------------------
def save_pretrained(model, folder, *, tokenizer=None, overwrite: bool = False) -> Path:
    """Write ``model`` as a transformers folder: ``config.json`` + ``model.safetensors``,
    and, if given, ``tokenizer`` in the form ``AutoTokenizer`` reads
    (``tokenizers/hf_files.py``: WordPiece's vocab.txt, GPT-2's vocab.json + merges.txt, a
    tokenizer.json for words and characters) plus, for all but byte-level BPE, minipt's own
    ``minipt_tokenizer.json``. An ELECTRA is two folders, ``discriminator/`` and
    ``generator/``, each with the tokenizer.

    Raises ValueError for a model no transformers class can hold (a family without a layout,
    GPT-3's sparse layers, GPT-1 with exact GELU, mixed styles) before anything is written,
    and FileExistsError when ``folder`` exists and is not empty (pass ``overwrite=True`` to
    replace the export files in it, leaving every other file and subfolder as it is)."""
    folder = Path(folder)
    layout = layout_of(model)
    dtype = np.dtype(model.dtype).name
    if dtype not in _DTYPES:
        raise ValueError(f"model dtype {dtype}: expected float32 or float64")
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"{folder} is a file; export needs a folder path")
    if folder.exists() and any(folder.iterdir()) and not overwrite:
        raise FileExistsError(f"{folder} exists and is not empty; pass overwrite=True to replace the export "
                              "files in it")
    bos, eos = _bos_eos(tokenizer)
    if hasattr(layout, "parts"):                      # one minipt model, several transformers folders (ELECTRA)
        folders = {folder / sub: part for sub, part in layout.parts(model, dtype).items()}
    else:
        folders = {folder: (to_theirs(layout.entries(model.config), model.parameters()),
                            layout.config_to_hf(model.config, dtype, bos, eos))}
    for _, config in folders.values():
        if tokenizer is not None and tokenizer.vocab_size > config["vocab_size"]:
            raise ValueError(f"tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size is "
                             f"{config['vocab_size']}")
    for path, (tensors, config) in folders.items():
        write_folder(path, tensors, config, tokenizer, model.block_size)
    return folder


def _bos_eos(tokenizer) -> tuple[int | None, int | None]:
    """The ids of the tokenizer's bos and eos tokens (``hf_files.special_roles``), for config.json."""
    if tokenizer is None:
        return None, None
    from ..tokenizers.hf_files import special_roles
    roles = special_roles(tokenizer)
    return tuple(None if roles[r] is None else tokenizer.token_to_id(roles[r]) for r in ("bos_token", "eos_token"))


def write_folder(folder: Path, tensors: dict, config: dict, tokenizer=None, block_size: int | None = None) -> None:
    """``config.json`` + ``model.safetensors`` (+ tokenizer files, ``model_max_length``
    ``block_size``) into ``folder``, written beside it first and moved into place (see
    ``_move_into_place``)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    try:
        write_tensors(tmp / WEIGHTS, tensors)
        write_config(tmp, config)
        if tokenizer is not None:
            _write_tokenizer(tokenizer, tmp, block_size)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)                 # mkdtemp makes 0700
        _move_into_place(tmp, folder)
    except BaseException:                             # KeyboardInterrupt included
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_tokenizer(tokenizer, folder: Path, block_size: int | None) -> None:
    """The transformers files (``hf_files.save_hf_tokenizer``) and, for all but byte-level
    BPE, whose GPT-2 files minipt reads back exactly, ``minipt_tokenizer.json`` too (what
    ``minipt sample --hf`` reads). A tokenizer with no transformers form gets only the latter."""
    from ..tokenizers.byte_bpe import ByteBPETokenizer
    from ..tokenizers.hf_files import has_hf_form, save_hf_tokenizer
    if has_hf_form(tokenizer):
        save_hf_tokenizer(tokenizer, folder, model_max_length=block_size)
    if not isinstance(tokenizer, ByteBPETokenizer):
        tokenizer.save(folder / MINIPT_TOKENIZER)


def _move_into_place(tmp: Path, folder: Path) -> None:
    """Rename the finished ``tmp`` to ``folder``. Into an existing folder, each new file
    replaces its namesake (``os.replace``), stale export files of an earlier export are
    removed (a vocab.json beside a model that no longer uses it), and nothing else is
    touched; ``tmp`` is then removed."""
    if not folder.exists():
        os.rename(tmp, folder)
        return
    new = {p.name for p in tmp.iterdir()}
    for name in sorted(new, key=lambda n: n == WEIGHTS):    # the weights last
        os.replace(tmp / name, folder / name)
    for name in export_files() - new:
        if (folder / name).is_file():
            (folder / name).unlink()
    os.rmdir(tmp)


# -- loading ---------------------------------------------------------------------------------
def config_from_folder(folder) -> tuple[GPTConfig, object]:
    """The minipt config a transformers folder describes, and its layout module."""
    hf = read_config(folder)
    layout = LAYOUTS.get(hf["model_type"]) or MODEL_LAYOUTS.get(hf["model_type"])
    if layout is electra_layout and electra_mlm_layout.reads(hf):     # one ELECTRA MLM folder, not a pair
        layout = electra_mlm_layout
    if layout is None:
        known = ", ".join(f"{k} ({m.ARCHITECTURE})" for k, m in {**LAYOUTS, **MODEL_LAYOUTS}.items())
        raise ValueError(f"{Path(folder) / 'config.json'}: model_type {hf['model_type']!r} is not supported; "
                         f"minipt reads {known}")
    try:
        return layout.config_from_hf(hf), layout
    except ValueError as e:                           # "config.json: <option> ..." -> with the folder
        msg = str(e).removeprefix("config.json: ")
        raise ValueError(f"{Path(folder) / 'config.json'}: {msg}") from None


def _pick_dtype(dtype, index: dict):
    """The requested dtype, or float64 when every stored tensor is float64, else float32."""
    if dtype is not None:
        if np.dtype(dtype).name not in _DTYPES:
            raise ValueError(f"dtype must be float32 or float64, got {np.dtype(dtype).name}")
        return np.dtype(dtype).type
    return np.float64 if {info.dtype for info in index.values()} == {"F64"} else np.float32


def from_pretrained(folder, *, dtype=None) -> GPT:
    """A minipt ``GPT`` with the weights of a transformers ``GPT2LMHeadModel``,
    ``LlamaForCausalLM`` or ``OpenAIGPTLMHeadModel`` folder (or the model of a ``MODEL_LAYOUTS``
    folder: XLNet, BERT, RoBERTa, ALBERT, ELECTRA, T5, BART). ``dtype`` float32 / float64
    (default: float64 if the file is float64, else float32; float16 tensors are widened).
    An encoder folder without some heads (``BertModel``, ``BertForMaskedLM``, ...) loads with
    those heads as initialised and one ``UserWarning`` naming them."""
    folder = Path(folder)
    if electra_layout.is_pair_folder(folder):        # ELECTRA: generator/ + discriminator/
        return electra_layout.from_pair_folder(folder, dtype)
    config, layout = config_from_folder(folder)
    index = layout_index(folder, layout)
    model = layout.build(config, np.random.default_rng(0), _pick_dtype(dtype, index)) if hasattr(layout, "build") \
        else GPT(config, rng=np.random.default_rng(0), dtype=_pick_dtype(dtype, index))
    table = layout.entries(config)
    copies = layout.tied_copies(config) if hasattr(layout, "tied_copies") else \
        ({"lm_head.weight": table[0].theirs} if config.tie_embeddings else {})
    table, index, note = _heads_present(folder, layout, table, index)
    shapes = {n: p.shape for n, p in model.named_parameters()}
    stored = read_checked(folder, index, table, {e.ours: shapes[e.ours] for e in table}, copies, layout.ARCHITECTURE)
    arrays = from_theirs(table, stored, model.dtype)
    model.load_state_dict({**model.parameters(), **arrays})       # absent heads: as initialised
    if note:
        warnings.warn(note, stacklevel=2)
    return model


def _heads_present(folder, layout, table: list, index: dict) -> tuple[list, dict, str | None]:
    """``table`` without the entries of heads (``layout.HEADS``: what -> name prefix) that have
    no tensor in ``index``, ``index`` without ``layout.UNUSED`` tensors, and the one-line note
    naming both (None when the folder holds every head)."""
    heads = getattr(layout, "HEADS", {})
    absent = {what: prefix for what, prefix in heads.items() if not any(n.startswith(prefix) for n in index)}
    table = [e for e in table if not e.theirs.startswith(tuple(absent.values()))]
    unused = {p: why for p, why in getattr(layout, "UNUSED", {}).items() if any(n.startswith(p) for n in index)}
    index = {n: v for n, v in index.items() if not n.startswith(tuple(unused))}
    parts = []
    if absent:
        parts.append(f"no {', no '.join(f'{w} ({p}*)' for w, p in absent.items())} in this folder: "
                     f"left at minipt's initialisation, so their outputs mean nothing until trained")
    parts += [f"{p}* not loaded: {why}" for p, why in unused.items()]
    return table, index, f"{folder}: {'; '.join(parts)}" if parts else None


# LayerNorm parameters under the names of Google's TensorFlow BERT, which files converted from it
# still use (bert-base-uncased's model.safetensors among them); transformers renames them alike
LEGACY_NAMES = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}


def _modern_name(name: str) -> str:
    for old, new in LEGACY_NAMES.items():
        if name.endswith(old):
            return name[:-len(old)] + new
    return name


def layout_index(folder, layout) -> dict:
    """The folder's tensor index under the names of ``layout`` (a bare file's names get its
    prefix, ``LEGACY_NAMES`` their present names), buffers left out."""
    index = {}
    for name, info in tensor_index(folder).items():
        modern = _modern_name(name)
        if modern in index:
            both = " and ".join(sorted({index[modern].key, name}))
            raise ValueError(f"{folder}: tensor {modern} is stored twice, as {both}")
        index[modern] = info
    if not any(name.startswith(layout.PREFIX) for name in index):     # a bare GPT2Model / LlamaModel file
        index = {(n if n == "lm_head.weight" else layout.PREFIX + n): v for n, v in index.items()}
    return {n: v for n, v in index.items() if not layout.is_buffer(n)}


def read_checked(folder, index: dict, table, shapes: dict, copies: dict, architecture: str) -> dict:
    """The tensors ``table`` names, read after checking names and shapes against the model's
    parameter ``shapes``; ``copies`` (name -> the tensor it repeats, tied) may be stored too
    and must then equal what they copy."""
    want = their_shapes(table, shapes)
    spare = {n: source for n, source in copies.items() if n in index}   # some tied files still store them
    have = {n: v for n, v in index.items() if n not in spare}
    check_tensors(folder, want, have, architecture)
    stored = read_tensors(index, list(want) + list(spare))
    for name, source in spare.items():
        if not np.array_equal(stored[name], stored[source]):
            hint = "; set tie_word_embeddings to false to load an untied head" if name == "lm_head.weight" else ""
            raise ValueError(f"{folder}: tie_word_embeddings is true but {name} differs from {source}{hint}")
    return stored


def check_tensors(folder, want: dict, have: dict, architecture: str) -> None:
    """The file's tensors ``have`` (name -> info with ``.shape``) must be exactly ``want``
    (name -> shape): a missing, extra or mis-shaped tensor is a ValueError naming it."""
    missing = [n for n in want if n not in have]
    if missing:
        raise ValueError(f"{folder}: tensor {missing[0]} {want[missing[0]]} is missing from the safetensors file"
                         + (f" ({len(missing)} missing in all)" if len(missing) > 1 else ""))
    extra = sorted(n for n in have if n not in want)
    if extra:
        raise ValueError(f"{folder}: tensor {extra[0]} {have[extra[0]].shape} is not part of a {architecture} "
                         f"with this config.json" + (f" ({len(extra)} unexpected in all)" if len(extra) > 1 else ""))
    for name, shape in want.items():
        if have[name].shape != shape:
            raise ValueError(f"{folder}: tensor {name} has shape {have[name].shape}, but config.json implies {shape}")
