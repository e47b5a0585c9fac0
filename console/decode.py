"""How the console shows a record's bytes: UTF-8 text, JSON pretty-printed, or hex."""

from __future__ import annotations

import json
from dataclasses import dataclass

# A value longer than this is cut in the table (the full size is shown beside it).
MAX_SHOWN_BYTES = 16_384


@dataclass(frozen=True, slots=True)
class Shown:
    kind: str  # "null", "json", "text" or "hex"
    text: str
    size: int  # bytes, -1 for null
    truncated: bool = False


def _utf8(data: bytes, truncated: bool) -> str | None:
    """The text, or None when it is not UTF-8. A cut value may end inside a
    character (up to 3 bytes of it): that tail is dropped, nothing else."""
    for drop in range(4 if truncated else 1):
        try:
            return data[: len(data) - drop].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def show(data: bytes | None) -> Shown:
    """JSON (an object or array) pretty-printed, else UTF-8 text, else hex."""
    if data is None:
        return Shown("null", "null", -1)
    size = len(data)
    truncated = size > MAX_SHOWN_BYTES
    cut = data[:MAX_SHOWN_BYTES]
    text = _utf8(cut, truncated)
    if text is None or any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        return Shown("hex", cut.hex(" "), size, truncated)
    if not truncated and text.lstrip()[:1] in ("{", "["):
        try:
            return Shown("json", json.dumps(json.loads(text), indent=2, ensure_ascii=False), size)
        except ValueError:
            pass  # looks like JSON but is not: shown as the text it is
    return Shown("text", text, size, truncated)
