"""Tokenizers, in teaching order: characters -> words -> BPE (Sennrich et al. 2016) ->
byte-level BPE (GPT-2, Radford et al. 2019) -> WordPiece (BERT, Devlin et al. 2019).

All share one base class (``Tokenizer``: ``encode``, ``encode_array``, ``decode``,
``id_to_token``, ``token_to_id``, ``vocab_size``, special tokens, JSON ``save``/``load``).
"""
from .base import Tokenizer
from .bpe import BPETokenizer, learn_merges, learn_merges_naive
from .byte_bpe import ByteBPETokenizer, bytes_to_unicode, pre_split
from .char import CharTokenizer
from .special import BERT_SPECIALS, BOS, ENDOFTEXT, EOS, t5_sentinels
from .word import WordTokenizer
from .wordpiece import WordPieceTokenizer, basic_tokenize

__all__ = ["Tokenizer", "CharTokenizer", "WordTokenizer", "BPETokenizer", "ByteBPETokenizer",
           "WordPieceTokenizer", "learn_merges", "learn_merges_naive", "bytes_to_unicode",
           "pre_split", "basic_tokenize", "BERT_SPECIALS", "BOS", "EOS", "ENDOFTEXT",
           "t5_sentinels"]
