"""Vision-language pre-training on toy scenes: single-stream and two-stream Transformers."""
