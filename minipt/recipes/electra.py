"""The recipe behind ``minipt train electra``: the BERT recipe (``encoder.py``) on packed
full sentences, with ELECTRA's batches (15 % [MASK]ed for the generator) and a report
on replaced-token detection measured the way a detector is judged.

Why not accuracy: about 12 % of the tokens are replaced (15 % masked, less the samples
that equal the original), so "always original" already scores 0.88, and a discriminator
whose thresholded decisions never flip can still rank replaced tokens above originals.
The report gives, over every real token of ``n_batches`` held-out batches:

- **ROC AUC** of the is-replaced score z (``tasks.metrics.roc_auc``): 0.5 is chance, 1 a
  perfect ranking; it does not depend on a threshold or on the replaced share;
- the **discriminator loss** (mean binary cross-entropy, nats) against the **base-rate
  entropy** H(p), p the replaced share: the loss of always predicting p, the floor a
  detector that learnt anything must beat;
- thresholded accuracy (z > 0) beside "always original", the share of replaced tokens
  found, and the generator's accuracy at the masked positions.

``preset toy-uniform`` is the **uniform-generator control** (``generator_sampling=
"uniform"``, Electra's docstring): replacements drawn uniformly from the vocabulary are
easy to spot, so its AUC shows what the discriminator can learn at this budget when the
replacements are implausible; the ``toy`` preset's AUC, lower, is the cost of plausible
ones (the paper's point: a good generator makes the task hard).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..core.module import eval_mode
from ..objectives.common import IGNORE
from ..objectives.electra import generator_inputs
from ..tasks.metrics import binary_entropy, roc_auc
from .encoder import PRESETS, EncoderHooks, encoder_recipe


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


def detection_metrics(model, get_batch, n_batches: int, rng: np.random.Generator) -> dict:
    """Replaced-token detection over every real token of ``n_batches`` held-out batches
    (eval mode, so replacements are reproducible): AUC, loss against the base-rate
    entropy, accuracy against always-original, generator accuracy (module docstring)."""
    scores, labels, gen_hit, masked = [], [], 0, 0
    with eval_mode(model):
        for _ in range(n_batches):
            batch = get_batch("val", rng)
            out = model.outputs(*batch)
            real, chosen = out.replaced != IGNORE, batch[3] != IGNORE
            scores.append(out.logits[real].astype(np.float64))
            labels.append(out.replaced[real])
            gen_hit += int((out.generator_logits.argmax(-1) == batch[3])[chosen].sum())
            masked += int(chosen.sum())
    z, y = np.concatenate(scores), np.concatenate(labels)                        # (n,) each
    share = float(y.mean())
    bce = np.logaddexp(0.0, z) - y * z                                           # -log sigmoid(+-z)
    said = z > 0
    return {"rtd_auc": roc_auc(z, y), "disc_loss": float(bce.mean()), "base_rate_entropy": binary_entropy(share),
            "rtd_accuracy": float((said == (y == 1)).mean()), "rtd_baseline": 1 - share,
            "replaced_found": float(said[y == 1].mean()) if share else 0.0, "replaced_share": share,
            "rtd_tokens": int(len(y)), "generator_accuracy": gen_hit / masked}


def electra_evaluate(model, corpus, rng: np.random.Generator, n_batches: int = 20):
    """The recipe's report: ``detection_metrics`` on ``n_batches`` held-out batches."""
    m = detection_metrics(model, electra_batches(corpus), n_batches, rng)
    sampling = getattr(model.config, "generator_sampling", "mlm")
    return [f"replaced-token detection AUC {m['rtd_auc']:.3f} on {m['rtd_tokens']} held-out tokens (chance 0.5; "
            f"replacements {'uniform over the vocabulary' if sampling == 'uniform' else 'sampled from the generator'})",
            f"discriminator loss {m['disc_loss']:.3f} nats against {m['base_rate_entropy']:.3f} for the base rate "
            f"(replaced share {m['replaced_share']:.3f})",
            f"thresholded accuracy {m['rtd_accuracy']:.3f} (always 'original' {m['rtd_baseline']:.3f}; replaced "
            f"tokens found {m['replaced_found']:.3f}); generator accuracy at the masked positions "
            f"{m['generator_accuracy']:.3f}"], m


_bert = PRESETS["toy"]
_toy = replace(_bert, model={**_bert.model, "generator_d_model": 32, "generator_n_head": 2, "generator_d_ff": 128},
               expected="replaced-token AUC 0.594 on 17,857 held-out tokens (chance 0.5); discriminator loss 0.343 "
                        "nats against 0.362 for the base rate (11.7 % replaced); thresholded accuracy 0.884 (always "
                        "'original' 0.883); generator accuracy 0.272; validation loss 19.788; 600 steps, 484 s on a "
                        "shared 2-core machine at load 13-16")
ELECTRA_PRESETS = {   # BERT's toy run; the discriminator is BERT's size, the generator half as wide
    "toy": _toy,
    "toy-uniform": replace(_toy, model={**_toy.model, "generator_sampling": "uniform"},
                           expected="the uniform-generator control: replaced-token AUC 0.978 (chance 0.5); "
                                    "discriminator loss 0.080 nats against 0.396 for the base rate (13.5 % "
                                    "replaced); thresholded accuracy 0.978 (always 'original' 0.865); 600 steps, "
                                    "480 s at load 13-16"),
}

electra_recipe = encoder_recipe(EncoderHooks(mode="packed", sentence_task=None, batches=electra_batches,
                                             evaluate=electra_evaluate))
