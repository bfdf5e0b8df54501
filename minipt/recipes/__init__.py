"""Training recipes: data, tokenizer, presets and report for each kind of model; the registry entries point at them."""
