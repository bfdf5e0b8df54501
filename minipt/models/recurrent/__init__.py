"""Recurrent language models: the LSTM LM and ELMo (one paper per file)."""
