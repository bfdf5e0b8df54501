"""Generated "images" for vision-language pre-training: scenes of a few objects, each
seen as an object detector would report it, paired with captions whose words are known
to name particular regions.

Single- and two-stream models (VisualBERT, Li et al. 2019; ViLBERT, Lu et al. 2019;
LXMERT, Tan & Bansal 2019; UNITER, Chen et al. 2020) read an image as a set of regions:
a feature vector from a detector plus the region's box. Here a scene is 2-4 objects on a
unit square, each with a category, a colour and a box, and the "detector" reports:

- ``features`` (N, F): one-hot category and one-hot colour plus Gaussian noise
  (``noise``), then a fixed random rotation, so no single feature is a clean label;
- ``boxes`` (N, 4): (x0, y0, x1, y1) in [0, 1], y growing downwards;
- ``box_features`` (N, 5): the boxes and the area, as UNITER and VL-BERT feed them.

A caption names one or two objects by colour and category, and for two objects their
relation ("a red ball left of a blue key ."). ``grounding`` lists which word names which
region, the truth the attention pictures of lesson 26 are checked against. Matching
pairs, retrieval candidates and question-answer pairs ("what colour is the ball ?" ->
"red") come from the same scenes, so every answer is known.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.checks import check_positive_int

CATEGORIES = ("ball", "key", "stone", "cat", "dog", "apple")
COLOURS = ("red", "blue", "green", "yellow")
RELATIONS = ("left of", "right of", "above", "below")
MAX_REGIONS = 8
N_FEATURES = len(CATEGORIES) + len(COLOURS) + 6           # labels + 6 dimensions of pure noise


@dataclass(frozen=True)
class Scene:
    categories: np.ndarray          # (N,) ids into CATEGORIES
    colours: np.ndarray             # (N,) ids into COLOURS
    boxes: np.ndarray               # (N, 4) x0, y0, x1, y1 in [0, 1]
    features: np.ndarray            # (N, F) the detector's region features

    @property
    def n_regions(self) -> int:
        return len(self.categories)


def _rotation(seed: int = 1234) -> np.ndarray:
    """A fixed random orthogonal (F, F) matrix: features mix every label dimension."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(N_FEATURES, N_FEATURES)))
    return q


_ROTATION = _rotation()


def check_regions(features: np.ndarray, boxes: np.ndarray, max_regions: int = MAX_REGIONS) -> None:
    """Regions must number 1..max_regions, with (N, F) features and (N, 4) boxes inside the
    unit square with x0 < x1 and y0 < y1; a ValueError says which rule is broken."""
    features, boxes = np.asarray(features), np.asarray(boxes)
    if features.ndim != 2 or boxes.ndim != 2 or boxes.shape[1] != 4 or len(features) != len(boxes):
        raise ValueError(f"regions: expected features (N, F) and boxes (N, 4), got {features.shape} and {boxes.shape}")
    if not 1 <= len(boxes) <= max_regions:
        raise ValueError(f"a scene needs 1 to {max_regions} regions, got {len(boxes)}")
    if (boxes < 0).any() or (boxes > 1).any():
        raise ValueError(f"boxes must lie inside the image [0, 1]^2, got values from {boxes.min():.3g} "
                         f"to {boxes.max():.3g}")
    if (boxes[:, 2] <= boxes[:, 0]).any() or (boxes[:, 3] <= boxes[:, 1]).any():
        raise ValueError("every box needs x0 < x1 and y0 < y1")


def detector_features(categories: np.ndarray, colours: np.ndarray, rng: np.random.Generator,
                      noise: float = 0.3) -> np.ndarray:
    """(N,) labels -> (N, F) noisy, rotated one-hot features."""
    n = len(categories)
    x = np.zeros((n, N_FEATURES))                                          # (N, F)
    x[np.arange(n), categories] = 1.0
    x[np.arange(n), len(CATEGORIES) + colours] = 1.0
    return (x + noise * rng.normal(size=x.shape)) @ _ROTATION             # (N, F)


def box_features(boxes: np.ndarray) -> np.ndarray:
    """(N, 4) -> (N, 5): the box and its area."""
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])       # (N,)
    return np.concatenate([boxes, area[:, None]], 1)


def make_scene(rng: np.random.Generator, n_objects: int | None = None, noise: float = 0.3) -> Scene:
    """2-4 objects (or ``n_objects``) of distinct (category, colour) pairs, boxes in a
    3 x 3 grid of cells so that left/right/above/below are never ambiguous."""
    n = int(rng.integers(2, 5)) if n_objects is None else check_positive_int("n_objects", n_objects)
    if n > min(MAX_REGIONS, 9):
        raise ValueError(f"n_objects must be at most {min(MAX_REGIONS, 9)}, got {n}")
    pairs = rng.choice(len(CATEGORIES) * len(COLOURS), size=n, replace=False)
    cats, cols = pairs // len(COLOURS), pairs % len(COLOURS)
    cells = rng.choice(9, size=n, replace=False)
    x0 = (cells % 3) / 3 + rng.uniform(0.01, 0.08, n)
    y0 = (cells // 3) / 3 + rng.uniform(0.01, 0.08, n)
    w, h = rng.uniform(0.15, 0.24, n), rng.uniform(0.15, 0.24, n)
    boxes = np.stack([x0, y0, x0 + w, y0 + h], 1)                          # (N, 4)
    return Scene(cats, cols, boxes, detector_features(cats, cols, rng, noise))


def relation(scene: Scene, i: int, j: int) -> str:
    """How region i stands to region j, by the larger offset of their centres."""
    c = (scene.boxes[:, :2] + scene.boxes[:, 2:]) / 2                      # (N, 2)
    dx, dy = c[i] - c[j]
    if abs(dx) >= abs(dy):
        return "left of" if dx < 0 else "right of"
    return "above" if dy < 0 else "below"


def caption(scene: Scene, rng: np.random.Generator) -> tuple[list[str], list[tuple[int, int]]]:
    """Words and grounding [(word index, region index)]: "a red ball ." or "a red ball
    left of a blue key ."; both the colour and the category word are grounded."""
    picked = rng.choice(scene.n_regions, size=min(2, scene.n_regions), replace=False)
    words, grounding = [], []
    for k, r in enumerate(picked):
        if k:
            words += relation(scene, int(picked[0]), int(r)).split()
        grounding += [(len(words) + 1, int(r)), (len(words) + 2, int(r))]
        words += ["a", COLOURS[scene.colours[r]], CATEGORIES[scene.categories[r]]]
    return words + ["."], grounding


def describes(scene: Scene, words: list[str]) -> bool:
    """Whether a caption is true of the scene: every (colour, category) it names is
    there, and the relation between them holds."""
    named = [(COLOURS.index(words[i + 1]), CATEGORIES.index(words[i + 2]))
             for i, w in enumerate(words[:-2]) if w == "a"]
    index = {(int(c), int(k)): r for r, (k, c) in enumerate(zip(scene.categories, scene.colours))}
    if any(pair not in index for pair in named):
        return False
    if len(named) == 2:
        rel = " ".join(words[3:words.index("a", 1)])
        return relation(scene, index[named[0]], index[named[1]]) == rel
    return True


def matching_pairs(n: int, seed: int = 0) -> list[tuple[Scene, list[str], int]]:
    """(scene, caption, 1 if the caption describes the scene else 0), half and half;
    a mismatched caption is taken from another scene and checked to be false here."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < check_positive_int("n", n):
        scene = make_scene(rng)
        if len(out) % 2 == 0:
            out.append((scene, caption(scene, rng)[0], 1))
            continue
        words, _ = caption(make_scene(rng), rng)
        if not describes(scene, words):
            out.append((scene, words, 0))
    return out


def question(scene: Scene, rng: np.random.Generator) -> tuple[list[str], str]:
    """A question with a one-word answer: the colour of a category present once, or (at
    even odds, and always when no category is alone) how many objects the scene holds."""
    singles = [int(k) for k in scene.categories if (scene.categories == k).sum() == 1]
    if rng.random() < 0.5 or not singles:
        return ["how", "many", "objects", "?"], str(scene.n_regions)
    k = int(rng.choice(singles))
    r = int(np.flatnonzero(scene.categories == k)[0])
    return ["what", "colour", "is", "the", CATEGORIES[k], "?"], COLOURS[scene.colours[r]]


def answers() -> list[str]:
    """Every answer a question can have: colours and counts."""
    return list(COLOURS) + [str(n) for n in range(1, MAX_REGIONS + 1)]
