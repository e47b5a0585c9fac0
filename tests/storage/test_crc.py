"""CRC-32C: the fast path (`crc32c` package) against the reference (`crcmod`).

Doc section 0: reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF,
check value of ASCII "123456789" is 0xE3069283.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.crc import crc32c, crc32c_reference

IMPLEMENTATIONS = [crc32c, crc32c_reference]
IMPL_IDS = ["fast", "reference"]

Buffer = bytes | bytearray | memoryview


def _bitwise_crc32c(data: bytes) -> int:
    """Textbook bit-at-a-time CRC-32C, written from the doc's parameters only."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=IMPL_IDS)
def test_check_value(impl: Callable[[Buffer], int]) -> None:
    assert impl(b"123456789") == 0xE3069283


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=IMPL_IDS)
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", 0x00000000),
        # RFC 3720 (iSCSI) appendix B.4 test vectors
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
    ],
    ids=["empty", "zeros", "ones", "ascending", "descending"],
)
def test_known_vectors(impl: Callable[[Buffer], int], data: bytes, expected: int) -> None:
    assert impl(data) == expected


def test_bitwise_model_matches_check_value() -> None:
    # Guards the model used below: if it were wrong the property test would be void.
    assert _bitwise_crc32c(b"123456789") == 0xE3069283


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2048), kind=st.sampled_from(["bytes", "bytearray", "memoryview"]))
def test_fast_and_reference_agree(data: bytes, kind: str) -> None:
    buf: Buffer
    if kind == "bytes":
        buf = data
    elif kind == "bytearray":
        buf = bytearray(data)
    else:
        buf = memoryview(data)
    fast = crc32c(buf)
    assert fast == crc32c_reference(buf)
    assert 0 <= fast <= 0xFFFFFFFF


@settings(max_examples=50, deadline=None)
@given(data=st.binary(max_size=200))
def test_fast_path_matches_bitwise_model(data: bytes) -> None:
    assert crc32c(data) == _bitwise_crc32c(data)


@settings(max_examples=100, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=512),
    bounds=st.tuples(st.integers(0, 512), st.integers(0, 512)),
)
def test_memoryview_slices(data: bytes, bounds: tuple[int, int]) -> None:
    """The batch code checksums memoryview slices that do not start at 0."""
    lo, hi = sorted(bounds)
    view = memoryview(data)[lo:hi]
    expected = crc32c_reference(data[lo:hi])
    assert crc32c(view) == expected
    assert crc32c(bytearray(data)[lo:hi]) == expected


@pytest.mark.parametrize("size", [1 << 16, (1 << 20) + 7, 4 << 20])
def test_large_inputs_agree(size: int) -> None:
    data = os.urandom(size)
    assert crc32c(data) == crc32c_reference(data)
    assert crc32c(memoryview(data)[3:]) == crc32c_reference(data[3:])


def test_single_bit_flips_change_the_crc() -> None:
    data = bytearray(os.urandom(256))
    base = crc32c(data)
    for i in range(len(data)):
        for bit in (0x01, 0x80):
            data[i] ^= bit
            assert crc32c(data) != base, (i, bit)
            data[i] ^= bit
    assert crc32c(data) == base
