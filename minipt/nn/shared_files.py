"""Arrays that two processes share: files in /dev/shm mapped into both, and messages whose
large arrays travel through such a file instead of the socket (``minipt.nn.part_processes``
sends a batch part's inputs and outputs so). A message is a tree of lists, tuples and
dicts; ``pack`` copies each array of at least ``SHARED_FROM`` bytes into the file and puts
a reference in its place, ``unpack`` turns the references back into arrays."""
from __future__ import annotations

import mmap
import os
import tempfile

import numpy as np

SHARED_FROM = 1 << 14              # bytes: arrays from this size on go through the shared files
ALIGN = 64


def aligned(n: int) -> int:
    """``n`` bytes rounded up to a multiple of ALIGN."""
    return -(-n // ALIGN) * ALIGN


class SharedFile:
    """A file in /dev/shm (else the temporary folder) mapped into memory: ``view`` gives
    arrays on it. The side that creates it unlinks it once the other side has mapped it."""

    def __init__(self, size: int, path: str | None = None):
        size = max(int(size), ALIGN)
        if path is None:
            where = "/dev/shm" if os.path.isdir("/dev/shm") else None
            fd, path = tempfile.mkstemp(prefix="minipt-part-", dir=where)
            os.ftruncate(fd, size)
        else:
            fd = os.open(path, os.O_RDWR)
        try:
            self.map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.path, self.size, self.top = path, size, 0

    def unlink(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def view(self, offset: int, shape, dtype) -> np.ndarray:
        return np.ndarray(shape, dtype, buffer=self.map, offset=offset)

    def put(self, a: np.ndarray):
        """Copy ``a`` in after what is there -> a reference ``unpack`` reads; None if full."""
        offset = aligned(self.top)
        if offset + a.nbytes > self.size:
            return None
        self.view(offset, a.shape, a.dtype)[...] = a
        self.top = offset + a.nbytes
        return _Ref((offset, a.shape, a.dtype.str))


class _Ref(tuple):
    """(offset, shape, dtype) of an array in a shared file, inside a message."""


def pack(obj, box: SharedFile):
    """``obj`` (arrays, None, numbers, or lists, tuples and dicts of them) with its large
    arrays copied into ``box`` and replaced by references."""
    if isinstance(obj, np.ndarray) and obj.nbytes >= SHARED_FROM:
        return box.put(obj) or obj
    if isinstance(obj, dict):
        return {k: pack(v, box) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(pack(v, box) for v in obj)
    return obj


def unpack(obj, box: SharedFile, copy_out: bool):
    """The inverse of ``pack``: references become arrays on ``box`` (or copies of them)."""
    if isinstance(obj, _Ref):
        a = box.view(obj[0], obj[1], np.dtype(obj[2]))
        return a.copy() if copy_out else a
    if isinstance(obj, dict):
        return {k: unpack(v, box, copy_out) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(unpack(v, box, copy_out) for v in obj)
    return obj


def nbytes(obj) -> int:
    """Room ``pack`` needs in a shared file for ``obj``'s arrays, at most."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes + ALIGN
    if isinstance(obj, dict):
        return nbytes(list(obj.values()))
    if type(obj) in (list, tuple):
        return sum(nbytes(v) for v in obj)
    return 0


def on_file(f: SharedFile, shapes) -> list[np.ndarray]:
    """Arrays on ``f`` of these (shape, dtype) pairs, one after another, each at an ALIGN
    boundary."""
    views, offset = [], 0
    for shape, dtype in shapes:
        views.append(f.view(offset, shape, dtype))
        offset += aligned(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return views


def room(shapes) -> int:
    """Bytes ``on_file`` needs for arrays of these (shape, dtype) pairs."""
    return sum(aligned(int(np.prod(shape)) * np.dtype(dtype).itemsize) for shape, dtype in shapes)
