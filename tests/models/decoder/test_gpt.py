import math

import numpy as np
import pytest

from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.models.decoder.llama import llama_config  # noqa: E402
from minipt.nn.kv_cache import KVCache

SMALL = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16)


@pytest.mark.parametrize("make", [GPTConfig.gpt1, GPTConfig.gpt2, GPTConfig.gpt3, llama_config])
def test_float32_step_stays_float32_and_loss_starts_near_log_v(make):
    model = GPT(make(**SMALL), rng=np.random.default_rng(0))
    idx = np.random.default_rng(1).integers(0, 11, (3, 8))
    loss, logits = model(idx, np.roll(idx, -1, axis=1))
    model.backward()
    assert loss.dtype == logits.dtype == np.float32
    assert all(g.dtype == np.float32 for _, g in model.named_grads())
    assert abs(float(loss) - math.log(11)) < 0.2


def test_tied_output_layer_has_no_extra_parameter():
    tied = GPT(GPTConfig.gpt2(**SMALL), rng=np.random.default_rng(0))
    untied = GPT(GPTConfig.gpt2(tie_embeddings=False, **SMALL), rng=np.random.default_rng(0))
    assert "lm_head.weight" not in tied.parameters() and "lm_head.weight" in untied.parameters()
    assert untied.num_parameters() - tied.num_parameters() == 11 * 16


def test_gpt2_scaled_residual_init():
    model = GPT(GPTConfig.gpt2(n_layer=8, **{k: v for k, v in SMALL.items() if k != "n_layer"}),
                rng=np.random.default_rng(0))
    proj = model.h.blocks[0].attn.c_proj.params["weight"].std()
    fc = model.h.blocks[0].attn.c_attn.params["weight"].std()
    assert abs(proj / fc - 1 / math.sqrt(16)) < 0.05


@pytest.mark.parametrize("make", [GPTConfig.gpt2, GPTConfig.gpt3, llama_config])
def test_cached_decoding_equals_full_forward(make):
    model = GPT(make(sparse_window=3, **SMALL) if make is GPTConfig.gpt3 else make(**SMALL),
                rng=np.random.default_rng(0)).to(np.float64).eval()
    idx = np.random.default_rng(1).integers(0, 11, (2, 7))
    _, full = model(idx)
    cache = KVCache(2)
    steps = [model(idx[:, :3], cache=cache)[1]] + [model(idx[:, t:t + 1], cache=cache)[1] for t in range(3, 7)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-12)


def test_bad_input():
    model = GPT(GPTConfig.gpt2(**SMALL), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="exceeds the context"):
        model(np.zeros((1, 9), np.int64))
    with pytest.raises(IndexError, match="token id 11"):
        model(np.array([[1, 11]]))
    with pytest.raises(ValueError, match="targets: expected shape"):
        model(np.zeros((1, 4), np.int64), np.zeros((1, 3), np.int64))
    with pytest.raises(ValueError, match="not divisible"):
        GPTConfig(d_model=10, n_head=3)
