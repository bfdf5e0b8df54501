# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Tokenizers: characters, words, BPE, bytes, WordPiece
#
# A language model reads integer ids. How text becomes ids decides the vocabulary size
# `V` (the width of the embedding and of the output layer) and the sequence length `T`
# (the cost of attention). This lesson runs the five tokenizers of `minipt.tokenizers`,
# in the order they were invented, on the same text:

# %% [markdown]
# 1. **characters**: tiny `V`, long `T`, never out of vocabulary for seen characters;
# 2. **words**: short `T`, huge `V`, and every unseen word becomes `<unk>`;
# 3. **BPE** (Sennrich et al. 2016): start from characters, repeatedly merge the most
#    frequent adjacent pair; a word is never unknown if its characters were seen;
# 4. **byte-level BPE** (GPT-2, Radford et al. 2019): the same on UTF-8 bytes, so *any*
#    string, Chinese or emoji included, encodes and decodes exactly;
# 5. **WordPiece** (BERT; Schuster & Nakajima 2012): greedy longest match of pieces, with
#    `##` marking a piece that continues a word, and `[UNK]` for what cannot be covered.

# %%
import matplotlib.pyplot as plt

from minipt.data.hmm_language import toy_corpus
from minipt.tokenizers import (
    BPETokenizer,
    ByteBPETokenizer,
    CharTokenizer,
    WordPieceTokenizer,
    WordTokenizer,
    learn_merges,
)

train_text, _, _, _ = toy_corpus(30_000, seed=0)
train_text = train_text.replace("\n", " ")
test_text = "the quickest fox chases a small fish near the riverbank ."
print(train_text[:160])

# %% [markdown]
# ## 1. The same text, five ways
# Each tokenizer is fitted on the toy language's text, then encodes a test sentence
# with two words it never saw ("quickest", "riverbank").

# %%
toks = {
    "char": CharTokenizer(unk_token="<unk>").fit(train_text),
    "word": WordTokenizer().fit(train_text),
    "BPE": BPETokenizer().fit(train_text, num_merges=60),
    "byte BPE": ByteBPETokenizer().fit(train_text, num_merges=60),
    "WordPiece": WordPieceTokenizer().fit(train_text, vocab_size=120),
}
rows = []
for name, tok in toks.items():
    ids = tok.encode(test_text)
    pieces = [tok.id_to_token(i) for i in ids]
    rows.append((name, tok.vocab_size, len(ids)))
    print(f"{name:>9}: V={tok.vocab_size:4d} T={len(ids):3d}  {pieces[:14]}")

fig, ax = plt.subplots(1, 2, figsize=(9, 3))
ax[0].bar([r[0] for r in rows], [r[1] for r in rows]); ax[0].set_title("vocabulary size V")
ax[1].bar([r[0] for r in rows], [r[2] for r in rows]); ax[1].set_title("tokens T for the test sentence")
ax[0].set_ylabel("entries in the vocabulary"); ax[1].set_ylabel("tokens")
for a in ax:
    a.set_xlabel("tokenizer")
plt.tight_layout(); plt.show()

# %% [markdown]
# The word tokenizer turned both new words into `<unk>`: whatever they meant is gone.
# BPE spells them from known pieces; characters and bytes never fail. WordPiece spells
# "quickest" but not "riverbank": it has a continuation piece such as `##k` only for a
# character it saw inside a word, and in the toy language "b" only ever starts one, so
# there is no `##b` and the whole word becomes `[UNK]` (BERT's vocabulary holds every
# character in both forms for this reason).

# %%
word = toks["word"]
bpe, wordpiece = toks["BPE"], toks["WordPiece"]
print("WordPiece:", wordpiece.tokenize("quickest"), wordpiece.tokenize("riverbank"), wordpiece.tokenize("bank"))
vocab = {wordpiece.id_to_token(i) for i in range(wordpiece.vocab_size)}

# %% tags=["checks"]
assert all(toks[n].decode(toks[n].encode(test_text)) == test_text for n in ("char", "byte BPE"))
assert word.decode(word.encode("the quickest fox")) == "the <unk> fox"
assert "<unk>" not in [bpe.id_to_token(i) for i in bpe.encode(test_text)]
assert "[UNK]" not in wordpiece.tokenize("quickest") and wordpiece.tokenize("riverbank") == ["[UNK]"]
assert "##b" not in vocab and "##k" in vocab

# %% [markdown]
# ## 2. BPE merges, by hand and by code
# Sennrich et al.'s example: the words *low* ×5, *lower* ×2, *newest* ×6, *widest* ×3,
# each ending with an end-of-word mark `</w>`. Count adjacent pairs over the corpus:
# `e s` occurs in newest and widest, 6 + 3 = 9 times, as does `s t` and `t </w>`; ties
# go to the pair that comes first in code-point order, so the first merge is `e s` → `es`.
# Then `es t` (9), then `est </w>` (9), then `l o` (7), then `lo w` (7), ...

# %%
corpus = {("l", "o", "w", "</w>"): 5, ("l", "o", "w", "e", "r", "</w>"): 2,
          ("n", "e", "w", "e", "s", "t", "</w>"): 6, ("w", "i", "d", "e", "s", "t", "</w>"): 3}
merges = learn_merges(corpus, 5)
print(merges)

# %% tags=["checks"]
assert [a + b for a, b in merges] == ["es", "est", "est</w>", "lo", "low"]

# %% [markdown]
# ## 3. Bytes: nothing is ever out of vocabulary
# GPT-2's tokenizer works on the UTF-8 bytes of the text, each byte shown as a printable
# character, so 256 base tokens cover every string. Merges learned on English text still
# apply; Chinese falls back to byte pieces (three per character here) but round-trips.

# %%
byte_bpe = toks["byte BPE"]
for s in ["the fox sleeps .", "语言模型", "emoji 🦊!", ""]:
    ids = byte_bpe.encode(s)
    print(f"{s!r:>18} -> {len(ids):2d} ids {[byte_bpe.id_to_token(i) for i in ids][:8]}")

# %% tags=["checks"]
assert all(byte_bpe.decode(byte_bpe.encode(x)) == x for x in ["the fox sleeps .", "语言模型", "emoji 🦊!", ""])
assert len(byte_bpe.encode("语言模型")) == 3 * 4 == len("语言模型".encode("utf-8"))
assert ByteBPETokenizer().vocab_size == 256 + 1                 # untrained: the bytes and <|endoftext|>

# %% [markdown]
# ## 4. WordPiece: longest match first, `##` for continuations
# BERT splits a word greedily: the longest vocabulary piece that starts the word, then the
# longest `##` piece that continues it, and so on; a word it cannot cover is `[UNK]`.

# %%
wp = WordPieceTokenizer.from_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                    "un", "##aff", "##able", "run", "##ning", "##n"])
print(wp.tokenize("unaffable running"), wp.tokenize("xyz"))

# %% tags=["checks"]
assert wp.tokenize("unaffable running") == ["un", "##aff", "##able", "run", "##ning"]
assert wp.tokenize("xyz") == ["[UNK]"]

# %% [markdown]
# ## 5. Special tokens are never split
# `[CLS]`, `[SEP]`, `[MASK]`, `<|endoftext|>` and T5's `<extra_id_k>` are registered, not
# learned: each is one id, wherever it stands in the text.

# %%
eot = byte_bpe.token_to_id("<|endoftext|>")
ids = byte_bpe.encode("a fox .<|endoftext|>the cat")
print(f"<|endoftext|> is id {eot} (the last id, as in GPT-2)")

# %% tags=["checks"]
assert ids.count(eot) == 1 and byte_bpe.decode(ids) == "a fox .<|endoftext|>the cat"
assert eot == byte_bpe.vocab_size - 1

# %% [markdown]
# **Summary.** Characters and bytes trade long sequences for a closed vocabulary; words
# trade a huge vocabulary for unknown words; BPE and WordPiece sit between, learning
# frequent pieces from data. GPT-2 chose byte-level BPE so that no input can fail;
# BERT's WordPiece keeps whole words where it can and marks continuations with `##`.

# %% [markdown]
# ## Exercises
# 1. Plot `T` of the test sentence against `num_merges` for BPE.
# 2. Why must a special token never be producible by a merge? Show that the text
#    `<|endoftext|>` typed inside a sentence becomes one id, and what the pieces of
#    `<|endoftext` (without the closing bar) are.
#
# ## Solutions

# %%
# 1. Every merge can only shorten the sequence, and the first merges shorten it most.
merges = [0, 10, 20, 40, 60, 100]
lengths = [len(BPETokenizer().fit(train_text, num_merges=n).encode(test_text)) for n in merges]
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(merges, lengths, "o-"); ax.set_xlabel("number of merges"); ax.set_ylabel("tokens T")
ax.set_title("BPE: the test sentence's length against merges"); plt.tight_layout(); plt.show()

# %%
# 2. A special token is matched before any merge runs, so it is always one id; if merges
#    could build it, ordinary text could forge a document boundary. Its prefix is ordinary text.
print(byte_bpe.encode("x <|endoftext|> y").count(eot), "id for the special token;",
      [byte_bpe.id_to_token(i) for i in byte_bpe.encode("<|endoftext")])
