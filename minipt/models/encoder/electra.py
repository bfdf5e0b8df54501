"""ELECTRA (Clark, Luong, Le & Manning 2020, "ELECTRA: Pre-training Text Encoders as
Discriminators Rather Than Generators").

Two BERT encoders (``bert.py``) trained together (section 2, figure 2):
- the **generator** G, a small masked LM: on the input with 15 % of tokens [MASK]ed
  (``objectives/electra.py``) it predicts the originals, L_MLM = mean over masked
  positions of -log p_G(x_t | x_masked);
- replacements x^_t ~ p_G(. | x_masked) are *sampled* at the masked positions; sampling is
  not differentiable and no gradient flows through it into G (the paper: "we do not
  back-propagate the discriminator loss through the generator");
- the **discriminator** D reads the corrupted sequence and says, for *every* real token,
  whether it was replaced: D(x, t) = sigmoid(w^T GELU(W h_t + b) + b_w),
  L_Disc = mean over real tokens of binary cross-entropy; a sample equal to the
  original counts as original;
- L = L_MLM + lambda L_Disc, lambda = 50 (section 3.1);
- **embedding sharing** (section 3.2): G and D share the token, position and segment
  embeddings (and their LayerNorm), so those arrays get the gradient of both losses. A
  generator narrower than E projects E -> H_G itself (``embedding_projection``).
After pre-training only D is kept (``model.discriminator``).

The binary cross-entropy is the 2-class softmax cross-entropy of the logits (0, z):
log sigmoid(z) = z - log(1 + e^z) = log softmax((0, z))[1], so it reuses
``ops/cross_entropy.py``.

Sampling draws from ``self.sampler`` (a Generator seeded by ``sample_seed``) in training;
in eval mode each call draws from a fresh Generator seeded with ``sample_seed``, so the same
batch always gets the same replacements and evaluation is deterministic.

Parameters (V vocab, P positions, E embedding size, H = d_model of D, H_G of G, F, F_G):

| name | shape | note |
|---|---|---|
| discriminator.embeddings.* | (V, E), (P, E), (2, E), (E,) | shared with the generator |
| discriminator.embedding_projection.* | (H, E), (H,) | only if E != H |
| discriminator.stack.blocks.i.* | | D's post-LN layers (H, F) |
| generator.embedding_projection.* | (H_G, E), (H_G,) | only if E != H_G |
| generator.stack.blocks.i.* | | G's layers (H_G, F_G) |
| generator_head.dense.*, .ln.*, .bias | (E, H_G), (E,), (E,), (V,) | G's MLM head, decoder tied to (V, E) |
| discriminator_head.dense.* | (H, H), (H,) | |
| discriminator_head.dense_prediction.* | (1, H), (1,) | z_t |
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import NamedTuple

import numpy as np

from ...core.checks import check_positive_int
from ...core.module import Module, eval_mode
from ...nn.activations import Activation
from ...nn.heads import MLMHead
from ...nn.linear import Linear
from ...objectives.electra import discriminator_inputs, generator_inputs
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...recipes.encoder import PRESETS, EncoderHooks, encoder_recipe
from ..protocol import IGNORE
from ..registry import ModelEntry, register
from . import bert
from .bert import BertConfig, BertEncoder, BertForPreTraining

DISC_WEIGHT = 50.0          # lambda (section 3.1)


@dataclass
class ElectraConfig:
    vocab_size: int = 64
    max_position: int = 64
    type_vocab_size: int = 2
    n_layer: int = 2                     # D (and G, unless generator_n_layer)
    n_head: int = 4
    d_model: int = 64                    # H of D
    d_ff: int = 256
    embedding_size: int | None = None    # E (None: E = H of D)
    generator_d_model: int = 16          # H_G: 1/4 of D, as ELECTRA-small's generator
    generator_n_head: int = 1
    generator_d_ff: int = 64
    generator_n_layer: int | None = None
    disc_weight: float = DISC_WEIGHT     # lambda
    dropout: float = 0.1
    eps: float = 1e-12
    activation: str = "gelu"
    sample_seed: int = 0

    def __post_init__(self) -> None:
        check_positive_int("generator_d_model", self.generator_d_model)
        if self.generator_n_layer is not None:
            check_positive_int("generator_n_layer", self.generator_n_layer)
        if not self.disc_weight > 0:
            raise ValueError(f"disc_weight (lambda) must be > 0, got {self.disc_weight}")
        check_positive_int("sample_seed", self.sample_seed, minimum=0)
        self.discriminator_config(), self.generator_config()        # validates the rest

    @property
    def embed_dim(self) -> int:
        return self.d_model if self.embedding_size is None else self.embedding_size

    def _encoder(self, d_model: int, n_head: int, d_ff: int, n_layer: int) -> BertConfig:
        E = self.embed_dim
        return BertConfig(vocab_size=self.vocab_size, max_position=self.max_position,
                          type_vocab_size=self.type_vocab_size, n_layer=n_layer, n_head=n_head, d_model=d_model,
                          d_ff=d_ff, dropout=self.dropout, eps=self.eps, activation=self.activation,
                          embedding_size=None if E == d_model else E, nsp=False)

    def discriminator_config(self) -> BertConfig:
        return self._encoder(self.d_model, self.n_head, self.d_ff, self.n_layer)

    def generator_config(self) -> BertConfig:
        return self._encoder(self.generator_d_model, self.generator_n_head, self.generator_d_ff,
                             self.generator_n_layer or self.n_layer)

    def to_dict(self) -> dict:
        return asdict(self)


class DiscriminatorHead(Module):
    """h (B, T, H) -> z (B, T) = dense_prediction(GELU(dense(h))), the is-replaced logit."""

    def __init__(self, d_model: int, *, rng: np.random.Generator, activation: str = "gelu", dtype=np.float32):
        super().__init__()
        self.dense = Linear(d_model, d_model, rng=rng, std=0.02, dtype=dtype)                 # (H, H)
        self.act = Activation(activation)
        self.dense_prediction = Linear(d_model, 1, rng=rng, std=0.02, dtype=dtype)            # (1, H)

    def forward(self, h: np.ndarray) -> np.ndarray:
        return self.dense_prediction(self.act(self.dense(h)))[..., 0]                         # (B, T)

    def backward(self, dz: np.ndarray) -> np.ndarray:
        return self.dense.backward(self.act.backward(self.dense_prediction.backward(dz[..., None])))


class ElectraOutput(NamedTuple):
    loss: np.ndarray            # () L_MLM + lambda L_Disc
    mlm_loss: np.ndarray        # () generator
    disc_loss: np.ndarray       # () discriminator
    generator_logits: np.ndarray    # (B, T, V)
    logits: np.ndarray          # (B, T) is-replaced scores z
    corrupted: np.ndarray       # (B, T) the discriminator's input ids
    replaced: np.ndarray        # (B, T) 1 = replaced, 0 = original, IGNORE on padding


class Electra(Module):
    """``loss, logits = model(input_ids, token_type_ids, attention_mask, mlm_labels)``:
    input_ids are the generator's input (masked), mlm_labels the originals at the masked
    positions (IGNORE elsewhere); logits (B, T) are the discriminator's is-replaced scores."""
    has_backward = True

    def __init__(self, config: ElectraConfig, *, rng: np.random.Generator, dtype=np.float32, name: str = "electra"):
        super().__init__()
        self.name, self.config = name, config
        c = config
        self.discriminator = BertEncoder(c.discriminator_config(), rng, dtype)
        self.generator = BertEncoder(c.generator_config(), rng, dtype)
        shared = dict(self.discriminator.embeddings.named_modules())
        for mod_name, mod in self.generator.embeddings.named_modules():      # one set of embedding arrays
            for key in mod.params:
                mod.tie(key, shared[mod_name], key)
        self.generator_head = MLMHead(c.generator_d_model, c.vocab_size, rng=rng, activation=c.activation,
                                      tied_to=self.discriminator.embeddings.word_embeddings,
                                      embedding_size=c.embed_dim, eps=c.eps, dtype=dtype)
        self.discriminator_head = DiscriminatorHead(c.d_model, rng=rng, activation=c.activation, dtype=dtype)
        self.sampler = np.random.default_rng(c.sample_seed)
        self._cache = None

    @property
    def block_size(self) -> int:
        return self.discriminator.max_length

    def new_cache(self) -> None:
        return None

    def spec(self) -> dict:
        return {"model": self.name, **self.config.to_dict()}

    def sample(self, generator_logits: np.ndarray, masked: np.ndarray) -> np.ndarray:
        """Draw x^_t ~ softmax(generator logits) at the masked positions (B, T) -> ids (B, T)
        (0 elsewhere). Plain NumPy on copied values: no gradient path exists."""
        rng = self.sampler if self.training else np.random.default_rng(self.config.sample_seed)
        z = generator_logits[masked].astype(np.float64)                         # (n, V)
        p = np.exp(z - z.max(axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)                                               # (n, V)
        u = rng.random(len(z))[:, None] * cdf[:, -1:]                           # (n, 1)
        samples = np.zeros(masked.shape, dtype=np.int64)
        samples[masked] = np.minimum((cdf < u).sum(axis=1), z.shape[1] - 1)      # inverse CDF
        return samples

    def outputs(self, input_ids: np.ndarray, token_type_ids: np.ndarray | None = None,
                attention_mask: np.ndarray | None = None, mlm_labels: np.ndarray | None = None) -> ElectraOutput:
        if mlm_labels is None:
            raise ValueError("mlm_labels are required: they mark the masked positions the generator fills in")
        hg = self.generator(input_ids, token_type_ids, attention_mask)          # (B, T, H_G); checks inputs
        labels = BertForPreTraining._mlm_targets(mlm_labels, input_ids.shape, attention_mask)   # (B, T)
        gen_logits = self.generator_head(hg)                                     # (B, T, V)
        mlm_loss, mlm_cache = cross_entropy_forward(gen_logits, labels)          # ()
        masked = labels != IGNORE                                                # (B, T)
        originals = np.where(masked, labels, input_ids)                          # (B, T)
        corrupted, replaced = discriminator_inputs(originals, labels, self.sample(gen_logits, masked))
        if attention_mask is not None:
            replaced = np.where(np.asarray(attention_mask).astype(bool), replaced, IGNORE)   # every real token
        hd = self.discriminator(corrupted, token_type_ids, attention_mask)      # (B, T, H)
        z = self.discriminator_head(hd)                                          # (B, T)
        two = np.stack([np.zeros_like(z), z], axis=-1)                           # (B, T, 2): log sigmoid
        disc_loss, disc_cache = cross_entropy_forward(two, replaced)             # ()
        loss = mlm_loss + self.config.disc_weight * disc_loss
        self._cache = (mlm_cache, disc_cache)
        return ElectraOutput(loss, mlm_loss, disc_loss, gen_logits, z, corrupted, replaced)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, mlm_labels=None):
        out = self.outputs(input_ids, token_type_ids, attention_mask, mlm_labels)
        return out.loss, out.logits

    def backward(self, dloss: float = 1.0) -> None:
        """dL/dtheta for L = L_MLM + lambda L_Disc. D's loss reaches D and the shared
        embeddings only; G's reaches G, its head and the shared embeddings."""
        if self._cache is None:
            raise RuntimeError("backward needs a forward first")
        mlm_cache, disc_cache = self._cache
        dtwo = cross_entropy_backward(self.config.disc_weight * float(dloss), disc_cache)   # (B, T, 2)
        self.discriminator.backward(self.discriminator_head.backward(dtwo[..., 1]))        # z sits in column 1
        self.generator.backward(self.generator_head.backward(cross_entropy_backward(dloss, mlm_cache)))


# -- the recipe's hooks (``recipes/encoder.py``) --------------------------------------
def electra_batches(corpus, model=None, max_tries: int = 100):
    """get_batch(split, rng): clean instances of an ``EncoderCorpus`` with 15 % of the
    ordinary tokens [MASK]ed (``objectives/electra.py``), drawn again while none is."""
    def get(split, rng):
        ids, segments, mask, _ = corpus.unmasked(split, rng)                   # (B, T) each
        for _ in range(max_tries):
            inputs, targets = generator_inputs(ids, rng, mask_id=corpus.mask_id, vocab_size=corpus.vocab_size,
                                               special_ids=corpus.special_ids, mask_prob=corpus.mask_prob)
            if (targets != IGNORE).any():
                return inputs, segments, mask, targets
        raise ValueError(f"no position was chosen for masking in {max_tries} draws")
    return get


def electra_evaluate(model: Electra, corpus, rng: np.random.Generator, n_batches: int = 20):
    """Replaced-token detection on held-out batches: accuracy over real tokens against
    the always-original baseline, the share of replaced tokens found, and the
    generator's accuracy at the masked positions."""
    get, hit, n, found, replaced, gen_hit, masked = electra_batches(corpus), 0, 0, 0, 0, 0, 0
    with eval_mode(model):
        for _ in range(n_batches):
            batch = get("val", rng)
            out = model.outputs(*batch)
            real, chosen = out.replaced != IGNORE, batch[3] != IGNORE
            said = (out.logits > 0).astype(np.int64)
            hit += int((said == out.replaced)[real].sum())
            n += int(real.sum())
            found += int((said == 1)[out.replaced == 1].sum())
            replaced += int((out.replaced == 1).sum())
            gen_hit += int((out.generator_logits.argmax(-1) == batch[3])[chosen].sum())
            masked += int(chosen.sum())
    metrics = {"rtd_accuracy": hit / n, "rtd_baseline": 1 - replaced / n, "replaced_found": found / max(replaced, 1),
               "replaced_share": replaced / n, "generator_accuracy": gen_hit / masked}
    return [f"replaced-token detection accuracy {metrics['rtd_accuracy']:.3f} on {n} held-out tokens (always "
            f"'original' {metrics['rtd_baseline']:.3f}); replaced tokens found {metrics['replaced_found']:.3f}; "
            f"generator accuracy at the masked positions {metrics['generator_accuracy']:.3f}"], metrics


# -- registry entry -------------------------------------------------------------------
ELECTRA_TINY = dict(vocab_size=bert.TINY["vocab_size"], max_position=8, n_layer=2, n_head=2, d_model=8, d_ff=16,
                    embedding_size=6, generator_d_model=4, generator_n_head=1, generator_d_ff=8, dropout=0.1)


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> Electra:
    return Electra(ElectraConfig(**settings), rng=rng, dtype=dtype, name="electra")


def tiny() -> tuple[Electra, tuple]:
    """BERT's tiny pairs with every labelled position [MASK]ed (ELECTRA masks with [MASK] only)."""
    ids, segments, mask, mlm, _ = bert.tiny_batch()
    ids = np.where(mlm != IGNORE, bert.MASK, ids)
    return bert.perturbed(build(rng=np.random.default_rng(0), dtype=np.float64, **ELECTRA_TINY)), (ids, segments, mask, mlm)


_bert = PRESETS["toy"]
ELECTRA_PRESETS = {   # BERT's toy run; the discriminator is BERT's size, the generator half as wide
    "toy": replace(_bert, model={**_bert.model, "generator_d_model": 32, "generator_n_head": 2,
                                 "generator_d_ff": 128},
                   expected="replaced-token detection accuracy 0.884 (always 'original' 0.883; 1.5 % of the "
                            "replaced tokens found); generator accuracy 0.272 at the masked positions; validation "
                            "loss 19.788; 600 steps, 534 s on a shared 2-core machine at load 20"),
}

register(ModelEntry(
    name="electra", title="ELECTRA", paper="Clark et al. 2020, ELECTRA: Pre-training Text Encoders as "
    "Discriminators Rather Than Generators", objective="MLM + 50 x replaced token detection", build=build,
    tiny=tiny, lesson="16_bert_variants", presets=ELECTRA_PRESETS,
    recipe=encoder_recipe(EncoderHooks(mode="packed", sentence_task=None, batches=electra_batches,
                                       evaluate=electra_evaluate)), language_model=False,
    verbs=("fill", "embed")))
