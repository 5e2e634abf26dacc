"""Lossless compression of the constant segment's weights, decoded by the DMA as a compressed LOAD reads them
(core/backends/accel/isa.py: LOAD flag COMPRESSED; the C simulator's decoder: runtime/qt_isa.h qt_isa_unpack_weights).

The format, width-packed groups: the raw bytes in groups of GROUP (the last one padded with zeros), each group one
header byte `w` in 0..8, then its GROUP values zigzag-coded (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...) in `w` bits each,
packed little-endian from the low bit: GROUP * w / 8 bytes. A group of zeros (the channel padding of a layer whose
channels are not a multiple of the block, pruned weights) is its header alone; int8 weights of small magnitude take
fewer than 8 bits. A decoder needs no table and keeps one group in flight."""

from __future__ import annotations

import numpy as np

GROUP = 16  # values per group: GROUP * w bits is a whole number of bytes for every w
MAX_WIDTH = 8


def _zigzag(values: np.ndarray) -> np.ndarray:
    wide = values.astype(np.int16)
    return np.where(wide >= 0, 2 * wide, -2 * wide - 1).astype(np.uint16)


def compress(raw: bytes) -> bytes:
    """The width-packed stream of `raw` (int8 values)."""
    values = np.frombuffer(raw, np.int8)
    padded = np.zeros(-(-len(values) // GROUP) * GROUP, np.int8)
    padded[: len(values)] = values
    codes = _zigzag(padded).reshape(-1, GROUP)
    widths = np.ceil(np.log2(codes.max(axis=1, initial=0).astype(np.float64) + 1)).astype(np.int64)
    out = bytearray()
    for width, group in zip(widths.tolist(), codes):
        out.append(width)
        if width:
            bits = ((group[:, None] >> np.arange(width)) & 1).astype(np.uint8).reshape(-1)  # value by value, low bit first
            out.extend(np.packbits(bits, bitorder="little").tobytes())
    return bytes(out)


def decompress(stream: bytes, length: int) -> bytes:
    """The first `length` raw bytes of a width-packed stream (CompressionError where it is not one)."""
    data = np.frombuffer(stream, np.uint8)
    out, position = [], 0
    for _ in range(-(-length // GROUP)):
        if position >= len(data):
            raise CompressionError(f"the stream ends after {position} bytes, before {length} bytes were decoded")
        width = int(data[position])
        if width > MAX_WIDTH:
            raise CompressionError(f"a group of width {width} at byte {position}: widths are 0..{MAX_WIDTH}")
        size = GROUP * width // 8
        packed = data[position + 1 : position + 1 + size]
        if len(packed) < size:
            raise CompressionError(f"the group at byte {position} needs {size} bytes; the stream has {len(packed)}")
        bits = np.unpackbits(packed, bitorder="little").reshape(GROUP, width) if width else np.zeros((GROUP, 0), np.uint8)
        codes = (bits.astype(np.int16) << np.arange(width)).sum(axis=1)
        out.append(np.where(codes % 2 == 0, codes // 2, -(codes + 1) // 2).astype(np.int8))
        position += 1 + size
    return np.concatenate(out).tobytes()[:length] if out else b""


class CompressionError(ValueError):
    """A stream that is not a width-packed encoding."""
