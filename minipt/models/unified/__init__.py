"""Unified and permuted language models: one Transformer, the objective chosen by its attention masks."""
