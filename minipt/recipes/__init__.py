"""Training recipes: data, tokenizer, presets and report for each kind of model; the registry entries point at them."""


def with_steps(train: dict, steps: int | None) -> dict:
    """A preset's training settings with ``--steps`` applied: a shorter run keeps its
    warm-up and evaluation in proportion (warm-up at most a tenth, an evaluation at the
    end at the latest). A new dict; ``train`` is left as it is."""
    settings = dict(train)
    if steps is not None:
        settings.update(steps=steps, warmup=min(settings.get("warmup", 0), steps // 10),
                        eval_every=min(settings.get("eval_every", steps), steps))
    return settings
