import numpy as np
import pytest

from minipt.inference.decoding import (
    SamplingConfig,
    beam_search,
    filter_logits,
    generate,
)
from minipt.models.decoder.gpt import GPT, GPTConfig


@pytest.fixture(scope="module")
def model():
    return GPT(GPTConfig.gpt2(vocab_size=9, block_size=12, n_layer=2, n_head=2, d_model=16),
               rng=np.random.default_rng(0)).to(np.float64)


def test_greedy_with_cache_equals_argmax_of_full_forward(model):
    prompt = np.array([1, 2, 3])
    new = generate(model, prompt, SamplingConfig(max_new_tokens=5, temperature=0), np.random.default_rng(0))
    seq = list(prompt)
    for _ in range(5):
        _, logits = model(np.array([seq]))
        seq.append(int(np.argmax(logits[0, -1])))
    assert new.tolist() == seq[3:]


def test_sampling_is_deterministic_under_a_seed(model):
    cfg = SamplingConfig(max_new_tokens=6, temperature=1.0, top_k=4, top_p=0.9)
    a = generate(model, np.array([1]), cfg, np.random.default_rng(5))
    b = generate(model, np.array([1]), cfg, np.random.default_rng(5))
    assert a.tolist() == b.tolist() and len(a) == 6


def test_filters():
    z = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    assert np.isfinite(filter_logits(z, top_k=2)).tolist() == [True, True, False, False]
    assert np.isfinite(filter_logits(z, top_p=0.7)).tolist() == [True, True, False, False]
    assert np.isfinite(filter_logits(z, top_p=0.5)).tolist() == [True, False, False, False]


def test_stop_token_and_long_prompt(model):
    _, logits = model(np.array([[4, 5]]))
    stop = int(np.argmax(logits[0, -1]))
    new = generate(model, np.array([4, 5]), SamplingConfig(max_new_tokens=5, temperature=0, stop_tokens=(stop,)),
                   np.random.default_rng(0))
    assert new.tolist() == [stop]
    with pytest.warns(UserWarning, match="kept the last 12 of 20 tokens"):
        generate(model, np.arange(20) % 9, SamplingConfig(max_new_tokens=1, temperature=0), np.random.default_rng(0))


def test_generation_runs_past_the_context_by_sliding_the_window(model):
    """block_size 12: 30 new tokens after a 5-token prompt; each token after the first
    slide equals the greedy choice of a plain forward over the window the sampler kept."""
    prompt = np.array([1, 2, 3, 4, 5])
    new = generate(model, prompt, SamplingConfig(max_new_tokens=30, temperature=0), np.random.default_rng(0))
    assert len(new) == 30
    seq = np.concatenate([prompt, new])
    keep = (3 * model.block_size) // 4
    # up to the first slide, every token is the argmax over the whole prefix
    for t in range(len(prompt), model.block_size + 1):
        _, logits = model(seq[None, :t])
        assert seq[t] == int(np.argmax(logits[0, -1]))
    # the token right after the first slide is the argmax given the last ``keep`` tokens
    t = model.block_size + 1
    _, logits = model(seq[None, t - keep:t])
    assert seq[t] == int(np.argmax(logits[0, -1]))


def test_beam_search_beats_or_ties_greedy(model):
    prompt = np.array([1, 2])
    def logprob(cont):
        seq = np.concatenate([prompt, cont])
        _, logits = model(seq[None, :-1])
        z = logits[0, len(prompt) - 1:]
        z = z - np.log(np.exp(z).sum(-1, keepdims=True))
        return z[np.arange(len(cont)), cont].sum()
    greedy = generate(model, prompt, SamplingConfig(max_new_tokens=4, temperature=0), np.random.default_rng(0))
    beam = beam_search(model, prompt, beam_size=4, max_new_tokens=4, length_penalty=0.0)
    assert len(beam) == 4 and logprob(beam) >= logprob(greedy) - 1e-12


@pytest.mark.parametrize("kw,msg", [(dict(max_new_tokens=0), "max_new_tokens"), (dict(temperature=-1), "temperature"),
                                    (dict(top_k=0), "top_k"), (dict(top_p=0.0), "top_p"), (dict(top_p=1.5), "top_p")])
def test_bad_sampling_settings(kw, msg):
    with pytest.raises(ValueError, match=msg):
        SamplingConfig(**kw)
