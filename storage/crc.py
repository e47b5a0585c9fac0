"""CRC-32C (Castagnoli), the checksum of record batches and producer snapshots.

`crcmod` is the reference implementation; the `crc32c` package (hardware
accelerated, ~60x faster here) serves the hot path. tests/storage/test_crc.py
proves they agree.
"""

from __future__ import annotations

import crc32c as _fast
import crcmod.predefined

_reference = crcmod.predefined.mkCrcFun("crc-32c")

Buffer = bytes | bytearray | memoryview


def crc32c(data: Buffer) -> int:
    """CRC-32C of `data` as an unsigned 32-bit int (fast path)."""
    return _fast.crc32c(data)


def crc32c_reference(data: Buffer) -> int:
    """CRC-32C of `data` computed by crcmod, the reference implementation."""
    crc: int = _reference(bytes(data))
    return crc
