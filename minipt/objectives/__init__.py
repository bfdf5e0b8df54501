"""Pre-training objectives: pure functions (token ids, Generator) -> model inputs and
targets, with ``IGNORE`` (-100) where nothing is predicted. Each cites its paper."""
from .causal_lm import pack_documents
from .common import IGNORE
from .mlm import DynamicMasking, mask_tokens, static_masks
from .t5_span import random_spans_noise_mask, span_corruption

__all__ = ["IGNORE", "pack_documents", "mask_tokens", "static_masks", "DynamicMasking",
           "random_spans_noise_mask", "span_corruption"]
