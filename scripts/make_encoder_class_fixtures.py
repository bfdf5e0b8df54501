"""Write the fixtures of tests/interop/test_encoder_classes.py: the encoder classes public
checkpoints are saved as (bert-base-uncased says ``BertForMaskedLM``, albert-base-v2
``AlbertForMaskedLM``, sentence encoders ``BertModel``), and left-padded batches.

Run by hand with torch 2.13.0 and transformers 5.23.0 (see scripts/make_bert_fixtures.py,
whose sizes, random weights and ``[CLS] A [SEP] B [SEP]`` batch these reuse):

    .venv/bin/python scripts/make_encoder_class_fixtures.py

Folders (``tests/interop/fixtures/classes/<name>/``, float64, as ``save_pretrained`` wrote them):

- ``bert_mlm`` (``BertForMaskedLM``: no pooler, no NSP head), ``bert_base`` (``BertModel``: names
  without ``bert.``, a pooler, no heads);
- ``roberta_base`` (``RobertaModel``: a pooler, which minipt's RoBERTa has no place for, no LM head);
- ``albert_mlm`` (``AlbertForMaskedLM``), ``albert_base`` (``AlbertModel``);
- ``electra_mlm`` (``ElectraForMaskedLM``, a generator on its own, E 8 < H 16 so with
  ``embeddings_project``), ``electra_base`` (``ElectraModel``, E = H: no projection).

``classes_reference.safetensors``: the batch (``input_ids``, ``token_type_ids``,
``attention_mask``, ``labels``; RoBERTa's as ``roberta/...``), and per folder
``<name>/logits`` (MLM classes) or ``<name>/hidden`` (last_hidden_state) and
``<name>/pooled`` (the pooler's output, where there is one).

``left_padded_reference.safetensors``: the committed ``bert/``, ``roberta/`` and ``bart/``
folders of make_bert_fixtures.py / make_bart_fixtures.py run by transformers on a batch
whose second row is padded on the left: ``<name>/input_ids``, ``<name>/attention_mask``,
``<name>/logits`` (BART: ``bart/labels`` and ``bart/decoder_input_ids`` too). RoBERTa numbers
real tokens from pad + 1 by counting the non-pad ids, so its logits depend on the padding side.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import safetensors
import torch
import transformers
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_bert_fixtures import COMMON, OUT, P, V, pretraining_batch, randomize  # noqa: E402

CLASSES = OUT / "classes"


def bert_config():
    return transformers.BertConfig(**COMMON, tie_word_embeddings=True, attn_implementation="eager")


def roberta_config():
    return transformers.RobertaConfig(**{**COMMON, "pad_token_id": 1, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
                                         "max_position_embeddings": P + 2}, bos_token_id=0, eos_token_id=2,
                                      tie_word_embeddings=True, attn_implementation="eager")


def albert_config():
    cfg = transformers.AlbertConfig(**COMMON, embedding_size=8, num_hidden_groups=1, inner_group_num=1,
                                    tie_word_embeddings=True, attn_implementation="eager")
    cfg.hidden_act = "gelu_new"
    return cfg


def electra_config(E: int):
    return transformers.ElectraConfig(**COMMON, embedding_size=E, tie_word_embeddings=True,
                                      attn_implementation="eager")


MODELS = {"bert_mlm": (transformers.BertForMaskedLM, bert_config), "bert_base": (transformers.BertModel, bert_config),
          "roberta_base": (transformers.RobertaModel, roberta_config),
          "albert_mlm": (transformers.AlbertForMaskedLM, albert_config),
          "albert_base": (transformers.AlbertModel, albert_config),
          "electra_mlm": (transformers.ElectraForMaskedLM, lambda: electra_config(8)),
          "electra_base": (transformers.ElectraModel, lambda: electra_config(16))}


def classes() -> None:
    gen = torch.Generator().manual_seed(1)
    batch = pretraining_batch(gen)
    rbatch = pretraining_batch(gen, cls=0, sep=2, pad=1, mask_id=4)
    rbatch["token_type_ids"] = torch.zeros_like(rbatch["input_ids"])
    ref = {k: v.numpy() for k, v in batch.items()}
    ref.update({f"roberta/{k}": v.numpy() for k, v in rbatch.items()})
    shutil.rmtree(CLASSES, ignore_errors=True)
    for name, (cls, config) in MODELS.items():
        model = cls(config()).to(torch.float64).eval()
        randomize(model, gen)
        inputs = {k: v for k, v in (rbatch if name.startswith("roberta") else batch).items() if k != "labels"}
        with torch.no_grad():
            out = model(**inputs)
        if hasattr(out, "logits"):
            ref[f"{name}/logits"] = out.logits.numpy()
        else:
            ref[f"{name}/hidden"] = out.last_hidden_state.numpy()
            if getattr(out, "pooler_output", None) is not None:        # ElectraModel has no pooler
                ref[f"{name}/pooled"] = out.pooler_output.numpy()
        model.save_pretrained(CLASSES / name)
        (CLASSES / name / "generation_config.json").unlink(missing_ok=True)
        print(name, cls.__name__, sorted(k for k in ref if k.startswith(name)))
    save(ref, OUT / "classes_reference.safetensors", " + ".join(c.__name__ for c, _ in MODELS.values()))


def left_padded() -> None:
    """Row 1 padded on the left: [PAD PAD PAD] + 7 real tokens; row 0 full."""
    gen = torch.Generator().manual_seed(2)
    ref = {}
    for name, cls, pad in (("bert", transformers.BertForPreTraining, 0),
                           ("roberta", transformers.RobertaForMaskedLM, 1),
                           ("bart", transformers.BartForConditionalGeneration, 1)):
        model = cls.from_pretrained(OUT / name, dtype=torch.float64, attn_implementation="eager").eval()
        ids = torch.randint(5, V, (2, 10), generator=gen)
        ids[:, 0] = 0 if name != "bert" else 1                             # <s> / [CLS]
        ids[1, :3] = pad
        ids[1, 3] = ids[0, 0]
        mask = (torch.arange(10)[None] >= torch.tensor([[0], [3]])).long()
        kw = dict(input_ids=ids, attention_mask=mask)
        if name == "bart":
            labels = torch.randint(3, V, (2, 6), generator=gen)
            labels[:, 0] = 0
            kw["labels"] = labels
            ref["bart/labels"] = labels.numpy()
            ref["bart/decoder_input_ids"] = transformers.models.bart.modeling_bart.shift_tokens_right(
                labels, 1, model.config.decoder_start_token_id).numpy()
        with torch.no_grad():
            out = model(**kw)
        logits = out.prediction_logits if name == "bert" else out.logits
        ref[f"{name}/input_ids"], ref[f"{name}/attention_mask"] = ids.numpy(), mask.numpy()
        ref[f"{name}/logits"] = logits.numpy()
        print(name, "left-padded logits", tuple(logits.shape))
    save(ref, OUT / "left_padded_reference.safetensors", "BertForPreTraining + RobertaForMaskedLM + "
         "BartForConditionalGeneration")


def save(ref: dict, path: Path, classes: str) -> None:
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__,
            "script": "scripts/make_encoder_class_fixtures.py", "class": classes}
    save_file({k: np.asarray(v, order="C") for k, v in ref.items()}, str(path), metadata=meta)


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    classes()
    left_padded()
