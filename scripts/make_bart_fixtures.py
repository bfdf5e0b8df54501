"""Write tests/interop/fixtures/bart/ and bart_reference.safetensors: a tiny random
``BartForConditionalGeneration`` and what transformers computes with it, for the default
test suite (no torch) to check minipt's BART against (tests/interop/test_bart_fixtures.py).

Run by hand with torch 2.13.0 and transformers 5.23.0 (see scripts/make_hf_fixtures.py):

    /work/hfvenv/bin/python scripts/make_bart_fixtures.py

The model: 2 encoder and 2 decoder layers, d_model 16, 2 heads, FFN 24, vocab 40,
max_position_embeddings 20, float64, exact GELU, no dropout, tied embeddings; every
parameter random (LayerNorm gains 1 + noise, biases non-zero), ``final_logits_bias`` too
(a buffer in transformers: the script gives it ``requires_grad`` so that its gradient is
recorded as well). A batch of 2 sources of 10 tokens (row 1 padded after 7 with
``attention_mask`` 0 on the padding) and labels of 8 tokens (row 1 with its last 2 IGNORE,
-100); transformers shifts the labels right behind ``decoder_start_token_id``.
The file holds ``input_ids``, ``attention_mask``, ``labels``, ``decoder_input_ids``,
``logits`` (2, 8, 40), ``loss``, ``grad/<name>`` for every parameter, and
``greedy/input_ids`` + ``greedy/output``: transformers' cached greedy generation of 12 new
tokens (no forced tokens; ``eos_token_id`` None: no early stop and no EOS suppression).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import safetensors
import torch
import transformers
from safetensors.numpy import save_file
from transformers import BartConfig, BartForConditionalGeneration
from transformers.models.bart.modeling_bart import shift_tokens_right

OUT = Path(__file__).resolve().parent.parent / "tests" / "interop" / "fixtures"
V, C, L, H, F, P, B, S, T = 40, 16, 2, 2, 24, 20, 2, 10, 8


def randomize(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Matrices N(0, 0.2^2), LayerNorm gains 1 + N(0, 0.1^2), the rest N(0, 0.1^2)."""
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + [("final_logits_bias", model.final_logits_bias)]:
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif p.ndim == 1 or name == "final_logits_bias":
                p.copy_(0.1 * noise)
            else:
                p.copy_(0.2 * noise)


def main() -> None:
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(0)
    cfg = BartConfig(vocab_size=V, d_model=C, encoder_layers=L, decoder_layers=L, encoder_attention_heads=H,
                     decoder_attention_heads=H, encoder_ffn_dim=F, decoder_ffn_dim=F, max_position_embeddings=P,
                     activation_function="gelu", dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                     scale_embedding=False, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                     decoder_start_token_id=2, forced_eos_token_id=None, tie_word_embeddings=True)
    model = BartForConditionalGeneration(cfg).to(torch.float64).eval()
    assert model.lm_head.weight is model.model.shared.weight, "the head is not tied"
    randomize(model, gen)
    folder = OUT / "bart"
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    (folder / "generation_config.json").unlink(missing_ok=True)

    ids = torch.randint(3, V, (B, S), generator=gen)
    ids[:, 0], ids[0, -1], ids[1, 6] = 0, 2, 2                      # <s> ... </s>
    ids[1, 7:] = 1                                                   # <pad>
    mask = (ids != 1).long()
    labels = torch.randint(3, V, (B, T), generator=gen)
    labels[:, 0], labels[1, 6:] = 0, -100
    model.final_logits_bias.requires_grad_(True)
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    ref = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "labels": labels.numpy(),
           "decoder_input_ids": shift_tokens_right(labels, 1, 2).numpy(),
           "logits": out.logits.detach().numpy(), "loss": out.loss.detach().numpy(),
           "grad/final_logits_bias": model.final_logits_bias.grad.numpy().copy()}
    for name, p in model.named_parameters():                       # tied weights appear once
        ref[f"grad/{name}"] = p.grad.numpy().copy()
    model.final_logits_bias.requires_grad_(False)

    with torch.no_grad():
        gen_ids = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, num_beams=1,
                                 max_new_tokens=12, eos_token_id=None, use_cache=True, forced_bos_token_id=None,
                                 forced_eos_token_id=None, no_repeat_ngram_size=0, decoder_start_token_id=2)
    ref["greedy/input_ids"], ref["greedy/output"] = ids.numpy(), gen_ids.numpy()
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__, "script": "scripts/make_bart_fixtures.py"}
    save_file({k: np.ascontiguousarray(v) for k, v in ref.items()}, str(OUT / "bart_reference.safetensors"),
              metadata=meta)
    print(f"bart: loss {float(ref['loss']):.6f}, {sum(p.numel() for p in model.parameters())} parameters, "
          f"greedy {gen_ids.tolist()}")


if __name__ == "__main__":
    main()
