"""Write tests/interop/fixtures/<arch>/ and <arch>_reference.safetensors for the BERT family:
tiny random transformers models and what transformers computes with them, for the default
test suite (no torch) to check minipt against (tests/interop/test_bert_fixtures.py).

Run by hand with torch 2.13.0 and transformers 5.23.0 (see scripts/make_hf_fixtures.py):

    /work/hfvenv/bin/python scripts/make_bert_fixtures.py            # every architecture
    /work/hfvenv/bin/python scripts/make_bert_fixtures.py bert       # one

Each model: 2 layers, hidden 16, 2 heads, intermediate 24, vocab 40, 16 positions, float64,
exact GELU, no dropout, eager attention, every parameter random (matrices N(0, 0.2^2), norm
gains 1 + N(0, 0.1^2), biases N(0, 0.1^2)). One batch of 2 sequences of 10 tokens,
``[CLS] A [SEP] B [SEP]``, the second row padded (``attention_mask`` 0 on its last 3
positions, pad id 0), three positions per row replaced by [MASK] (id 3) with their
original ids as MLM labels (-100 elsewhere).

- ``bert`` (``BertForPreTraining``): MLM + NSP (``next_sentence_label`` [1, 0]), tied decoder.
- ``roberta`` (``RobertaForMaskedLM``): MLM only, ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, mask id 4,
  one segment, 18 position rows (16 + the offset 2), ``layer_norm_eps`` 1e-5.
- ``albert`` (``AlbertForPreTraining``): E = 8 < H = 16, one layer group (every layer shared),
  tanh GELU (``gelu_new``, ALBERT's default), MLM + SOP (``sentence_order_label`` [1, 0];
  stored as ``next_sentence_label`` / ``nsp_logits``, minipt's names for the 2-way head).
- ``electra``: a pair folder, ``generator/`` (``ElectraForMaskedLM``, hidden 12, intermediate 20)
  and ``discriminator/`` (``ElectraForPreTraining``), E = 8 (both project it), equal
  embeddings. The generator reads the masked batch (MLM loss); the discriminator reads the
  batch with fixed replacements ``samples`` at the masked positions (one equal to the
  original, so not replaced) and its ``replaced`` labels. Reference keys ``generator/...``
  and ``discriminator/...`` (logits, loss, gradients of each network's own loss).

The reference file holds the batch, ``logits`` (prediction scores), the other head's
logits where there is one, ``loss`` and ``grad/<name>`` for every parameter
(``named_parameters``: a tied weight appears once, under the embedding's name).
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

OUT = Path(__file__).resolve().parent.parent / "tests" / "interop" / "fixtures"
V, P, C, L, H, F, B, T = 40, 16, 16, 2, 2, 24, 2, 10
PAD, CLS, SEP, MASK = 0, 1, 2, 3
COMMON = dict(vocab_size=V, hidden_size=C, num_hidden_layers=L, num_attention_heads=H, intermediate_size=F,
              max_position_embeddings=P, hidden_act="gelu", hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12, type_vocab_size=2, pad_token_id=PAD)


def randomize(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Every parameter random: matrices N(0, 0.2^2), norm gains 1 + N(0, 0.1^2), the rest N(0, 0.1^2)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith("LayerNorm.weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif p.ndim == 1:
                p.copy_(0.1 * noise)
            else:
                p.copy_(0.2 * noise)


def pretraining_batch(gen: torch.Generator, cls: int = CLS, sep: int = SEP, pad: int = PAD,
                      mask_id: int = MASK) -> dict[str, torch.Tensor]:
    """``[CLS] A [SEP] B [SEP]`` (2, 10), row 1 padded; 3 [MASK]ed positions per row."""
    CLS, SEP, PAD, MASK = cls, sep, pad, mask_id
    ids = torch.randint(5, V, (B, T), generator=gen)
    ids[:, 0] = CLS
    ids[0, 4], ids[0, 9] = SEP, SEP                       # row 0: A = 3 tokens, B = 4
    ids[1, 3], ids[1, 6] = SEP, SEP                       # row 1: A = 2, B = 2, then 3 padding
    ids[1, 7:] = PAD
    segments = torch.tensor([[0] * 5 + [1] * 5, [0] * 4 + [1] * 3 + [0] * 3])
    mask = torch.tensor([[1] * 10, [1] * 7 + [0] * 3])
    labels = torch.full((B, T), -100)
    for b, where in enumerate(([2, 5, 8], [1, 2, 5])):
        for t in where:
            labels[b, t] = ids[b, t]
            ids[b, t] = MASK
    return dict(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=labels)


def reference(model, out, prefix: str = "") -> dict[str, np.ndarray]:
    ref = {f"{prefix}logits": out.logits.detach().numpy() if hasattr(out, "logits") else
           out.prediction_logits.detach().numpy(), f"{prefix}loss": out.loss.detach().numpy()}
    for name, p in model.named_parameters():                    # tied weights appear once
        assert p.grad is not None, f"{name} received no gradient"
        ref[f"{prefix}grad/{name}"] = p.grad.numpy().copy()
    return ref


def bert(gen: torch.Generator) -> tuple:
    cfg = transformers.BertConfig(**COMMON, tie_word_embeddings=True, attn_implementation="eager")
    model = transformers.BertForPreTraining(cfg).to(torch.float64).eval()
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight, "not tied"
    randomize(model, gen)
    inputs = pretraining_batch(gen)
    nsp = torch.tensor([1, 0])
    out = model(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"],
                attention_mask=inputs["attention_mask"], labels=inputs["labels"], next_sentence_label=nsp)
    out.loss.backward()
    ref = reference(model, out)
    ref["nsp_logits"], ref["next_sentence_label"] = out.seq_relationship_logits.detach().numpy(), nsp.numpy()
    return model, inputs, ref


def roberta(gen: torch.Generator) -> tuple:
    cfg = transformers.RobertaConfig(**{**COMMON, "pad_token_id": 1, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
                                        "max_position_embeddings": P + 2},
                                     bos_token_id=0, eos_token_id=2,
                                     tie_word_embeddings=True, attn_implementation="eager")
    model = transformers.RobertaForMaskedLM(cfg).to(torch.float64).eval()
    assert model.lm_head.decoder.weight is model.roberta.embeddings.word_embeddings.weight, "not tied"
    randomize(model, gen)
    inputs = pretraining_batch(gen, cls=0, sep=2, pad=1, mask_id=4)
    inputs["token_type_ids"] = torch.zeros_like(inputs["input_ids"])
    out = model(**inputs)
    out.loss.backward()
    return model, inputs, reference(model, out)


def albert(gen: torch.Generator) -> tuple:
    cfg = transformers.AlbertConfig(**COMMON, embedding_size=8, num_hidden_groups=1, inner_group_num=1,
                                    tie_word_embeddings=True, attn_implementation="eager")
    cfg.hidden_act = "gelu_new"
    model = transformers.AlbertForPreTraining(cfg).to(torch.float64).eval()
    assert model.predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight, "not tied"
    randomize(model, gen)
    inputs = pretraining_batch(gen)
    sop = torch.tensor([1, 0])
    out = model(**inputs, sentence_order_label=sop)
    out.loss.backward()
    ref = reference(model, out)
    ref["nsp_logits"], ref["next_sentence_label"] = out.sop_logits.detach().numpy(), sop.numpy()
    return model, inputs, ref


def electra(gen: torch.Generator) -> tuple:
    """Generator (``ElectraForMaskedLM``, hidden 12) and discriminator (``ElectraForPreTraining``,
    hidden 16), E = 8, the embeddings equal (shared, as in ELECTRA). Returns both models."""
    common = {**COMMON, "embedding_size": 8, "tie_word_embeddings": True, "attn_implementation": "eager"}
    disc = transformers.ElectraForPreTraining(transformers.ElectraConfig(**common)).to(torch.float64).eval()
    g_cfg = transformers.ElectraConfig(**{**common, "hidden_size": 12, "intermediate_size": 20})
    generator = transformers.ElectraForMaskedLM(g_cfg).to(torch.float64).eval()
    assert generator.generator_lm_head.weight is generator.electra.embeddings.word_embeddings.weight, "not tied"
    randomize(disc, gen)
    randomize(generator, gen)
    with torch.no_grad():                                         # one set of embeddings for both
        for (name, p), (name2, q) in zip(disc.electra.embeddings.named_parameters(),
                                         generator.electra.embeddings.named_parameters()):
            assert name == name2
            q.copy_(p)
    inputs = pretraining_batch(gen)
    masked = inputs["labels"] != -100
    samples = torch.randint(5, V, (B, T), generator=gen)
    samples[0, 2] = inputs["labels"][0, 2]                        # a sample equal to the original: not replaced
    originals = torch.where(masked, inputs["labels"], inputs["input_ids"])
    corrupted = torch.where(masked, samples, originals)
    replaced = (corrupted != originals).long()
    out_g = generator(**inputs)
    out_g.loss.backward()
    out_d = disc(input_ids=corrupted, token_type_ids=inputs["token_type_ids"], attention_mask=inputs["attention_mask"],
                 labels=replaced)
    out_d.loss.backward()
    ref = reference(generator, out_g, "generator/")
    ref.update(reference(disc, out_d, "discriminator/"))
    # transformers casts the labels with .float(), so its loss comes back as float32 (its
    # gradients stay float64); the reference loss is the same mean BCE over real tokens in float64
    active = inputs["attention_mask"] == 1
    loss64 = torch.nn.functional.binary_cross_entropy_with_logits(out_d.logits[active], replaced[active].double())
    assert abs(float(loss64) - float(out_d.loss)) < 1e-6, "not the loss transformers computed"
    ref["discriminator/loss"] = loss64.detach().numpy()
    ref.update(samples=samples.numpy(), corrupted=corrupted.numpy(), replaced=replaced.numpy())
    return {"discriminator": disc, "generator": generator}, inputs, ref


ARCHS = {"bert": bert, "roberta": roberta, "albert": albert, "electra": electra}


def write(name: str) -> None:
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(0)
    model, inputs, ref = ARCHS[name](gen)
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    models = model if isinstance(model, dict) else {"": model}
    for sub, m in models.items():                                 # ELECTRA: a pair folder
        m.save_pretrained(folder / sub)
        (folder / sub / "generation_config.json").unlink(missing_ok=True)
    ref.update({k: v.numpy() for k, v in inputs.items()})
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__, "script": "scripts/make_bert_fixtures.py",
            "class": " + ".join(type(m).__name__ for m in models.values())}
    save_file({k: np.asarray(v, order="C") for k, v in ref.items()}, str(OUT / f"{name}_reference.safetensors"),
              metadata=meta)
    losses = {k: float(v) for k, v in ref.items() if k.endswith("loss")}
    print(f"{name}: {meta['class']}, losses {losses}, "
          f"{sum(p.numel() for m in models.values() for p in m.parameters())} parameters")


def main() -> None:
    for name in sys.argv[1:] or list(ARCHS):
        write(name)


if __name__ == "__main__":
    main()
