"""Decoder-only models: GPT-1/2/3, LLaMA-style, GPT-1 fine-tuning heads, DialoGPT."""
