"""Encoder-only (autoencoding) models: BERT, the base of RoBERTa, ALBERT and ELECTRA."""
