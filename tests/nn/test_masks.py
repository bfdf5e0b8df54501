import numpy as np
import pytest

from minipt.nn import masks


def test_mask_structures_exactly():
    assert masks.causal(3).tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert masks.right_to_left(3).tolist() == [[1, 1, 1], [0, 1, 1], [0, 0, 1]]
    assert masks.bidirectional(2, 3).all() and masks.bidirectional(2, 3).shape == (2, 3)
    assert masks.prefix(4, 2).astype(int).tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert np.array_equal(masks.seq2seq(2, 2), masks.prefix(4, 2))
    assert masks.banded(4, 2).astype(int).tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    pad = masks.padding([2, 3], 3)
    assert pad.shape == (2, 1, 3) and pad[:, 0].astype(int).tolist() == [[1, 1, 0], [1, 1, 1]]
    full = masks.padding([1], 2, queries=True)
    assert full[0].astype(int).tolist() == [[1, 0], [0, 0]]
    assert masks.combine(None, masks.causal(3), masks.banded(3, 1)).astype(int).tolist() == np.eye(3).tolist()


def test_mask_bad_input():
    with pytest.raises(ValueError, match="prefix_len"):
        masks.prefix(3, 4)
    with pytest.raises(ValueError, match="lengths"):
        masks.padding([4], 3)
    with pytest.raises(TypeError, match="boolean"):
        masks.from_matrix(np.ones((2, 2)))
    with pytest.raises(ValueError, match="window"):
        masks.banded(4, 0)
