"""Encoder-decoder models: a bidirectional encoder, an autoregressive decoder with cross-attention."""
