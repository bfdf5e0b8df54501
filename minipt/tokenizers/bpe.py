"""Byte-pair encoding learned on text (Sennrich, Haddow & Birch 2016, "Neural Machine
Translation of Rare Words with Subword Units").

Training. The text is pre-split into words at whitespace; each distinct word becomes a
sequence of characters closed by the end-of-word symbol ``</w>`` (``low`` -> ``l o w
</w>``), weighted by how often the word occurs. Then, ``num_merges`` times: count every
pair of adjacent symbols over all words, take the most frequent pair ``(a, b)`` and
replace each of its occurrences (left to right, non-overlapping) by the new symbol
``ab``. The list of merges, in order, *is* the model.

Incremental counts. A naive trainer recounts every pair after every merge
(``learn_merges_naive``, kept as the reference). ``learn_merges`` instead keeps

* ``pair_counts``: pair -> weighted count, and ``where``: pair -> the words holding it;
* after merging ``(a, b)`` only the words in ``where[(a, b)]`` change, and in each of
  them only the pairs around the merge sites change count, so only those are updated;
* a heap of ``(-count, left, right)`` with lazy deletion (an entry whose count is no
  longer current is dropped when it reaches the top) finds the best pair in O(log P).

Tie-breaking (deterministic): among the pairs with the highest count, the one whose
``(left, right)`` token strings come first in code-point (Python string) order.
Unique tokens: a pair whose concatenation is already a token (e.g. ``ab c`` after
``a bc``), a special token or ``</w>`` is never merged, so every merge adds exactly one
new token string -- as in GPT-2's released files (50,000 merges, 50,257 tokens).
Pairs seen fewer than ``min_pair_count`` times are not merged (training stops early).

Encoding a word applies the learned merges by rank: repeatedly merge the adjacent pair
that was learned earliest, which reproduces the training segmentation. Decoding joins
the pieces and turns ``</w>`` into a space; whitespace is thus normalised to single
spaces (a literal ``</w>`` typed in the text is ambiguous -- byte-level BPE, next file,
removes both limits).
"""
from __future__ import annotations

import heapq
import re
from collections import Counter
from typing import Callable, Iterable, Mapping

from ..core.checks import check_positive_int
from .base import Tokenizer
from .special import check_special_token

END_OF_WORD = "</w>"
Pair = tuple[int, int]


def merge_pair(symbols: list, a, b, new) -> list:
    """Replace each occurrence of ``a`` followed by ``b`` (left to right, non-overlapping)
    by ``new``."""
    out, i, n = [], 0, len(symbols)
    while i < n:
        if i + 1 < n and symbols[i] == a and symbols[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def count_pairs(words: Iterable[list], freqs: Iterable[int]) -> dict:
    """Full recount: adjacent pair -> sum of the frequencies of its occurrences."""
    counts: dict = {}
    for word, f in zip(words, freqs):
        for p in zip(word, word[1:]):
            counts[p] = counts.get(p, 0) + f
    return counts


class PairStats:
    """Words (lists of symbol ids) with their frequencies, and the statistics a trainer
    needs, kept up to date incrementally by ``merge``: ``pair_counts``, ``where`` (pair ->
    indices of the words holding it) and ``symbol_counts`` (symbol id -> weighted count).
    ``symbols[i]`` is the string of symbol id ``i``."""

    def __init__(self, word_counts: Mapping[tuple[str, ...], int]) -> None:
        self.symbols: list[str] = []
        self.symbol_ids: dict[str, int] = {}
        self.words: list[list[int]] = []
        self.freqs: list[int] = []
        for word, f in sorted(word_counts.items()):
            if not isinstance(f, int) or f < 1:
                raise ValueError(f"word counts: expected positive int counts, got {f!r} for {word!r}")
            if len(word) == 0:
                raise ValueError("word counts: expected non-empty words, got an empty one")
            self.words.append([self.add_symbol(s) for s in word])
            self.freqs.append(f)
        self.pair_counts: dict[Pair, int] = count_pairs(self.words, self.freqs)
        self.where: dict[Pair, set[int]] = {}
        self.symbol_counts: dict[int, int] = {}
        for w, (word, f) in enumerate(zip(self.words, self.freqs)):
            for p in zip(word, word[1:]):
                self.where.setdefault(p, set()).add(w)
            for s in word:
                self.symbol_counts[s] = self.symbol_counts.get(s, 0) + f

    def add_symbol(self, s: str) -> int:
        if s not in self.symbol_ids:
            self.symbol_ids[s] = len(self.symbols)
            self.symbols.append(s)
        return self.symbol_ids[s]

    def merge(self, a: int, b: int, new: int) -> set[Pair]:
        """Merge ``(a, b)`` into ``new`` in every word holding it; return the pairs whose
        count changed. Only the words listed in ``where[(a, b)]`` are visited."""
        counts, where, sc = self.pair_counts, self.where, self.symbol_counts
        changed: set[Pair] = set()
        for w in where.pop((a, b), ()):
            old, f = self.words[w], self.freqs[w]
            word = merge_pair(old, a, b, new)
            n_merged = len(old) - len(word)
            if n_merged == 0:
                continue
            delta: dict[Pair, int] = {}        # change in this word's count of each pair
            for p in zip(old, old[1:]):
                delta[p] = delta.get(p, 0) - 1
            for p in zip(word, word[1:]):
                delta[p] = delta.get(p, 0) + 1
            present = set(zip(word, word[1:]))
            for p, d in delta.items():
                if d == 0:
                    continue                   # pairs away from the merge sites
                c = counts.get(p, 0) + d * f
                if c:
                    counts[p] = c
                else:
                    del counts[p]
                changed.add(p)
                if p in present:
                    where.setdefault(p, set()).add(w)
                elif p in where:
                    where[p].discard(w)
                    if not where[p]:
                        del where[p]
            self.words[w] = word
            sc[a] -= n_merged * f
            sc[b] -= n_merged * f
            sc[new] = sc.get(new, 0) + n_merged * f
        for s in (a, b):
            if sc.get(s) == 0:
                del sc[s]
        return changed


def _check_learn_args(word_counts, num_merges, min_pair_count) -> None:
    if not word_counts:
        raise ValueError("learn_merges: no words to learn from (empty training text?)")
    check_positive_int("num_merges", num_merges, minimum=0)
    check_positive_int("min_pair_count", min_pair_count)


def learn_merges(word_counts: Mapping[tuple[str, ...], int], num_merges: int, *,
                 min_pair_count: int = 2, reserved: Iterable[str] = (),
                 on_merge: Callable[[PairStats, tuple[str, str]], None] | None = None,
                 ) -> list[tuple[str, str]]:
    """Learn up to ``num_merges`` merges from ``word_counts`` (word as a tuple of initial
    symbols -> count), keeping pair counts incrementally. ``reserved`` strings (special
    tokens) are never produced. ``on_merge(stats, merge)`` is called after each merge."""
    _check_learn_args(word_counts, num_merges, min_pair_count)
    stats = PairStats(word_counts)
    sym = stats.symbols
    taken = set(sym) | set(reserved)
    heap = [(-c, sym[a], sym[b], a, b) for (a, b), c in stats.pair_counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges:
        while heap:
            negc, sa, sb, a, b = heap[0]
            if stats.pair_counts.get((a, b)) != -negc or sa + sb in taken:
                heapq.heappop(heap)            # stale count, or a banned concatenation
                continue
            break
        if not heap or -heap[0][0] < min_pair_count:
            break
        negc, sa, sb, a, b = heapq.heappop(heap)
        new = stats.add_symbol(sa + sb)
        taken.add(sa + sb)
        merges.append((sa, sb))
        for p in stats.merge(a, b, new):
            c = stats.pair_counts.get(p)
            if c:
                heapq.heappush(heap, (-c, sym[p[0]], sym[p[1]], p[0], p[1]))
        if on_merge is not None:
            on_merge(stats, (sa, sb))
    return merges


def learn_merges_naive(word_counts: Mapping[tuple[str, ...], int], num_merges: int, *,
                       min_pair_count: int = 2, reserved: Iterable[str] = ()) -> list[tuple[str, str]]:
    """Reference trainer: recount every pair over every word before each merge. Same
    rules (tie-breaking, banned concatenations) as ``learn_merges``; slow on purpose."""
    _check_learn_args(word_counts, num_merges, min_pair_count)
    words = [list(w) for w in word_counts]
    freqs = list(word_counts.values())
    taken = {s for w in words for s in w} | set(reserved)
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges:
        counts = count_pairs(words, freqs)
        allowed = [(-c, a, b) for (a, b), c in counts.items() if a + b not in taken]
        if not allowed:
            break
        negc, a, b = min(allowed)
        if -negc < min_pair_count:
            break
        taken.add(a + b)
        merges.append((a, b))
        words = [merge_pair(w, a, b, a + b) for w in words]
    return merges


def apply_merges(symbols: list[str], ranks: Mapping[tuple[str, str], int]) -> list[str]:
    """Segment one word: merge the adjacent pair of lowest rank until none is left."""
    symbols = list(symbols)
    while len(symbols) > 1:
        best, best_rank = None, len(ranks)
        for p in zip(symbols, symbols[1:]):
            r = ranks.get(p)
            if r is not None and r < best_rank:
                best, best_rank = p, r
        if best is None:
            break
        symbols = merge_pair(symbols, best[0], best[1], best[0] + best[1])
    return symbols


class MergeTokenizer(Tokenizer):
    """What both BPE tokenizers share: learned merges, their ranks, a per-word cache."""

    def _init_merges(self) -> None:
        self.merges: list[tuple[str, str]] = []
        self._ranks: dict[tuple[str, str], int] = {}
        self._cache: dict[str, list[int]] = {}

    def _learn(self, word_counts, num_merges: int, min_pair_count: int, reserved, alphabet: list[str]):
        """Learn merges and build the vocabulary: ``alphabet`` then one token per merge."""
        self.merges = learn_merges(word_counts, num_merges, min_pair_count=min_pair_count, reserved=reserved)
        self._build_vocab(list(alphabet) + [a + b for a, b in self.merges])
        return self

    def _vocab_changed(self) -> None:
        self._ranks = {tuple(m): r for r, m in enumerate(self.merges)}
        self._cache = {}


class BPETokenizer(MergeTokenizer):
    """Word-level BPE with ``</w>`` end-of-word marking. Characters not seen in training
    become ``unk_token`` (or raise ValueError naming them when ``unk_token=None``)."""

    def __init__(self, specials: Iterable[str] = (), unk_token: str | None = "<unk>") -> None:
        super().__init__(specials)
        self.unk_token = None if unk_token is None else check_special_token(unk_token)
        if self.unk_token is not None and self.unk_token not in self._specials:
            self._specials.append(self.unk_token)
        self._init_merges()

    def fit(self, text: str, num_merges: int, min_pair_count: int = 2) -> "BPETokenizer":
        counts: Counter[str] = Counter()
        for piece in self._training_pieces(text):
            counts.update(piece.split())
        if not counts:
            raise ValueError("fit: the training text holds no word (only whitespace or special tokens)")
        word_counts = {tuple(w) + (END_OF_WORD,): c for w, c in counts.items()}
        chars = sorted({ch for w in counts for ch in w})
        return self._learn(word_counts, num_merges, min_pair_count, self._specials, [END_OF_WORD] + chars)

    def _encode_ordinary(self, text: str, offset: int) -> list[int]:
        ids: list[int] = []
        for m in re.finditer(r"\S+", text):
            word = m.group()
            cached = self._cache.get(word)
            if cached is None:
                cached = self._encode_word(word, offset + m.start())
                if len(self._cache) < 100_000:
                    self._cache[word] = cached
            ids.extend(cached)
        return ids

    def _encode_word(self, word: str, offset: int) -> list[int]:
        stoi, special = self._stoi, self._special_ids
        symbols = []
        for j, ch in enumerate(word):
            if ch in stoi and ch not in special:
                symbols.append(ch)
            elif self.unk_token is None:
                raise ValueError(f"character {ch!r} (U+{ord(ch):04X}) at position {offset + j} was not "
                                 "seen in training; pass unk_token='<unk>' to map it to <unk>")
            else:
                symbols.append(None)           # placeholder: never part of a learned pair
        symbols.append(END_OF_WORD)
        pieces = []                            # runs of known characters are segmented apart
        run: list[str] = []
        for s in symbols:
            if s is None:
                pieces.extend(stoi[t] for t in apply_merges(run, self._ranks))
                pieces.append(stoi[self.unk_token])
                run = []
            else:
                run.append(s)
        pieces.extend(stoi[t] for t in apply_merges(run, self._ranks))
        return pieces

    def _decode(self, ids: list[int]) -> str:
        words, current = [], ""
        special = set(self._special_ids.values())
        for i in ids:
            tok = self._itos[i]
            if i in special:
                if current:
                    words.append(current)
                words.append(tok)
                current = ""
            elif tok.endswith(END_OF_WORD):
                words.append(current + tok[: -len(END_OF_WORD)])
                current = ""
            else:
                current += tok
        if current:
            words.append(current)
        return " ".join(words)

    def _config(self) -> dict:
        return {"unk_token": self.unk_token, "merges": [list(m) for m in self.merges]}

    def _load_config(self, config: dict) -> None:
        self.unk_token = config["unk_token"]
        self.merges = [tuple(m) for m in config["merges"]]
        self._ranks, self._cache = {}, {}
