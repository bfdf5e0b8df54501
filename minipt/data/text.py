"""Real text: any UTF-8 file, read with errors that say what is wrong."""
from __future__ import annotations

from pathlib import Path


def load_text(path, encoding: str = "utf-8") -> str:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no text file at {path}")
    raw = path.read_bytes()
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not valid {encoding}: byte {e.start} ({raw[e.start:e.start + 1]!r}) "
                         f"cannot be decoded") from None
    if not text.strip():
        raise ValueError(f"{path} is empty: a corpus needs some text")
    return text
