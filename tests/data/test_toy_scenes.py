"""Toy scenes: boxes in their cells, features that carry the labels only through noise,
captions whose grounded words name their regions and whose relations hold, matching
pairs that are true or false as labelled, answerable questions, and bad regions refused."""
import numpy as np
import pytest

from minipt.data import toy_scenes as ts


def test_scenes_boxes_and_features():
    rng = np.random.default_rng(0)
    for _ in range(50):
        s = ts.make_scene(rng)
        assert 2 <= s.n_regions <= 4
        ts.check_regions(s.features, s.boxes)
        assert len({(k, c) for k, c in zip(s.categories, s.colours)}) == s.n_regions
        assert s.features.shape == (s.n_regions, ts.N_FEATURES)
    clean = ts.detector_features(np.array([1, 4]), np.array([2, 0]), rng, noise=0.0) @ ts._ROTATION.T
    assert np.allclose(clean[0, [1, len(ts.CATEGORIES) + 2]], 1) and np.isclose(clean.sum(), 4)
    b = np.array([[0.1, 0.2, 0.5, 0.6]])
    assert np.allclose(ts.box_features(b), [[0.1, 0.2, 0.5, 0.6, 0.16]])


def test_captions_ground_their_words_and_hold():
    rng = np.random.default_rng(1)
    for _ in range(100):
        s = ts.make_scene(rng)
        words, grounding = ts.caption(s, rng)
        assert ts.describes(s, words)
        for w, r in grounding:
            assert words[w] in (ts.COLOURS[s.colours[r]], ts.CATEGORIES[s.categories[r]])
    s = ts.Scene(np.array([0, 1]), np.array([0, 1]), np.array([[0.0, 0.0, 0.2, 0.2], [0.7, 0.1, 0.9, 0.3]]),
                 np.zeros((2, ts.N_FEATURES)))
    assert ts.relation(s, 0, 1) == "left of" and ts.relation(s, 1, 0) == "right of"
    assert ts.describes(s, "a red ball left of a blue key .".split())
    assert not ts.describes(s, "a red ball right of a blue key .".split())
    assert not ts.describes(s, "a green ball .".split())


def test_matching_pairs_are_labelled_truthfully():
    pairs = ts.matching_pairs(40, seed=2)
    assert sum(label for _, _, label in pairs) == 20
    for scene, words, label in pairs:
        assert ts.describes(scene, words) == bool(label)


def test_questions_have_their_answers():
    rng = np.random.default_rng(3)
    kinds = set()
    for _ in range(100):
        s = ts.make_scene(rng)
        q, a = ts.question(s, rng)
        assert a in ts.answers()
        if q[0] == "how":
            assert a == str(s.n_regions)
        else:
            k = ts.CATEGORIES.index(q[4])
            assert (s.categories == k).sum() == 1 and ts.COLOURS[s.colours[s.categories == k][0]] == a
        kinds.add(q[0])
    assert kinds == {"how", "what"}


def test_bad_regions_are_refused_by_name():
    f = np.zeros((2, 4))
    with pytest.raises(ValueError, match="1 to 8 regions, got 0"):
        ts.check_regions(np.zeros((0, 4)), np.zeros((0, 4)))
    with pytest.raises(ValueError, match="1 to 8 regions, got 9"):
        ts.check_regions(np.zeros((9, 4)), np.tile([0, 0, 0.5, 0.5], (9, 1)))
    with pytest.raises(ValueError, match="inside the image"):
        ts.check_regions(f, np.array([[0, 0, 1.2, 0.5], [0, 0, 0.5, 0.5]]))
    with pytest.raises(ValueError, match="x0 < x1"):
        ts.check_regions(f, np.array([[0.5, 0, 0.2, 0.5], [0, 0, 0.5, 0.5]]))
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        ts.check_regions(f, np.zeros((2, 3)))
