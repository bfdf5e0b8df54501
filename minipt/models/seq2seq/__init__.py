"""Encoder-decoder models: the Transformer, T5, BART, MASS."""
