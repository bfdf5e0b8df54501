"""Numba's disk cache checks a cached kernel against the date of its own source file only.
A kernel that inlines a function of another file keeps the old copy after that file
changes: attention's part kernels inline the register tiles (minipt.kernels.tiles), so
attention.py records the hash of tiles.py, and editing one means editing the other."""
import hashlib
from pathlib import Path

from minipt.kernels import attention, tiles


def test_attention_records_the_hash_of_the_tiles_it_inlines():
    got = hashlib.sha256(Path(tiles.__file__).read_bytes()).hexdigest()[:16]
    assert attention.TILES_SOURCE == got, (
        f"minipt/kernels/tiles.py changed: set TILES_SOURCE = {got!r} in minipt/kernels/attention.py, "
        "so that Numba compiles the attention part kernels again")
