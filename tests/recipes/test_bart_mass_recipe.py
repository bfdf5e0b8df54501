"""recipes/bart_mass.py: the pre-training batches of ``minipt train bart|mass`` (each noise,
MASS's fragments), what the run refuses (experiments/bart_noises.py: tests/test_bart_noises_experiment.py)."""
from collections import Counter

import numpy as np
import pytest

from minipt.data import text_to_text as t2t
from minipt.models import registry
from minipt.models.protocol import IGNORE
from minipt.recipes.bart_mass import (
    NOISE_NAMES,
    denoising_batch,
    mass_pretrain_batch,
    noise,
    pretraining_texts,
)
from minipt.tokenizers.special import EOS, MASK, PAD


@pytest.fixture(scope="module")
def toy():
    data = t2t.text_to_text((30, 5, 5), seed=0)
    return t2t.build_tokenizer(data, (MASK,)), pretraining_texts(data, "train")


@pytest.mark.parametrize("name", NOISE_NAMES)
def test_denoising_batches_rebuild_the_original(toy, name):
    tok, texts = toy
    src, tin, tgt = denoising_batch(tok, texts, 8, np.random.default_rng(1), name)
    pad, eos, mask = tok.token_to_id(PAD), tok.token_to_id(EOS), tok.token_to_id(MASK)
    assert tin.shape == tgt.shape and src.shape[0] == tin.shape[0] == 8
    assert (tin[:, 0] == eos).all()                                       # </s> starts the decoder
    for b in range(8):
        x = tgt[b][tgt[b] != IGNORE]
        assert x[-1] == eos and (tin[b, 1:len(x)] == x[:-1]).all()        # teacher forcing on the original
        s = src[b][src[b] != pad]
        if name == "none":
            assert (s == x[:-1]).all()
        elif name in ("permutation", "rotation"):
            assert Counter(s.tolist()) == Counter(x[:-1].tolist())
        elif name == "deletion":
            assert len(s) <= len(x) - 1 and mask not in s
    if name in ("masking", "infilling", "infilling+permutation"):
        assert (src == mask).any()


def test_mass_batches_hide_half_of_each_text(toy):
    tok, texts = toy
    src, tin, tgt = mass_pretrain_batch(tok, texts, 8, np.random.default_rng(2), fragment=0.5)
    mask, pad = tok.token_to_id(MASK), tok.token_to_id(PAD)
    for b in range(8):
        m = int((src[b] != pad).sum())
        k = int((tgt[b] != IGNORE).sum())
        assert k == max(1, round(m * 0.5)) and (src[b] == mask).sum() == k
        assert (tin[b][tgt[b] == IGNORE] == mask).all()                  # the decoder's other positions masked


def test_bad_settings_are_refused(toy, tmp_path):
    tok, texts = toy
    with pytest.raises(ValueError, match="unknown noise 'shuffle'"):
        noise("shuffle", tok)
    with pytest.raises(ValueError, match="needs texts"):
        denoising_batch(tok, [], 4, np.random.default_rng(0))
    entry = registry.get("bart")
    with pytest.raises(ValueError, match="--corpus is not supported"):
        entry.recipe(entry, corpus="x.txt", out_dir=str(tmp_path / "r"), progress=False)
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "report.json").write_text("{}")
    with pytest.raises(FileExistsError):
        registry.get("mass").recipe(registry.get("mass"), out_dir=str(tmp_path / "r"), progress=False)
