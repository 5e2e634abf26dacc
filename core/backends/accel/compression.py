"""Lossless compression of the constant segment's weights, decoded by the DMA as a compressed LOAD reads them
(core/backends/accel/isa.py: LOAD flag COMPRESSED; the C simulator's decoder: runtime/qt_isa.h qt_isa_unpack_weights).

The format: the raw bytes in groups of GROUP (the last one padded with zeros), each group a header byte, its low four
bits a width `w` in 0..8 and its top bit MASKED, then
- plain: the GROUP values zigzag-coded (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...) in `w` bits each, packed little-endian
  from the low bit: GROUP * w / 8 bytes;
- masked: a 16-bit little-endian mask of the values that are not zero, then those values alone, zigzag-coded in `w`
  bits each, packed likewise into whole bytes.
The compressor takes the smaller of the two for each group. A group of zeros (the channel padding of a layer whose
channels are not a multiple of the block, pruned weights) is its header alone; a group of a few values (a B x B block's
row of one input channel) is its mask and those; int8 weights of small magnitude take fewer than 8 bits. A decoder needs
no table and keeps one group in flight."""

from __future__ import annotations

import numpy as np

GROUP = 16  # values per group: GROUP * w bits is a whole number of bytes for every w, and a mask is 16 bits
MAX_WIDTH = 8
MASKED = 0x80


def _zigzag(values: np.ndarray) -> np.ndarray:
    wide = values.astype(np.int16)
    return np.where(wide >= 0, 2 * wide, -2 * wide - 1).astype(np.uint16)


def _packed(codes: np.ndarray, width: int) -> bytes:
    """`codes` in `width` bits each, low bit first, in whole bytes."""
    if not width or not len(codes):
        return b""
    return np.packbits(((codes[:, None] >> np.arange(width)) & 1).astype(np.uint8).reshape(-1), bitorder="little").tobytes()


def compress(raw: bytes) -> bytes:
    """The stream of `raw` (int8 values), each group plain or masked, whichever is smaller."""
    values = np.frombuffer(raw, np.int8)
    padded = np.zeros(-(-len(values) // GROUP) * GROUP, np.int8)
    padded[: len(values)] = values
    codes = _zigzag(padded).reshape(-1, GROUP)
    widths = np.ceil(np.log2(codes.max(axis=1, initial=0).astype(np.float64) + 1)).astype(np.int64)
    out = bytearray()
    for width, group in zip(widths.tolist(), codes):
        present = group != 0
        masked_size = 2 + -(-int(present.sum()) * width // 8)
        if width and masked_size < GROUP * width // 8:
            out.append(MASKED | width)
            out.extend(int(np.packbits(present, bitorder="little").view("<u2")[0]).to_bytes(2, "little"))
            out.extend(_packed(group[present], width))
        else:
            out.append(width)
            out.extend(_packed(group, width))
    return bytes(out)


def _unpacked(data: np.ndarray, count: int, width: int) -> np.ndarray:
    if not width or not count:
        return np.zeros(count, np.int16)
    bits = np.unpackbits(data, bitorder="little")[: count * width].reshape(count, width)
    return (bits.astype(np.int16) << np.arange(width)).sum(axis=1)


def decompress(stream: bytes, length: int) -> bytes:
    """The first `length` raw bytes of a stream (CompressionError where it is not one)."""
    data = np.frombuffer(stream, np.uint8)
    out, position = [], 0
    for _ in range(-(-length // GROUP)):
        if position >= len(data):
            raise CompressionError(f"the stream ends after {position} bytes, before {length} bytes were decoded")
        header = int(data[position])
        width, masked = header & 0x0F, bool(header & MASKED)
        if width > MAX_WIDTH or header & 0x70:
            raise CompressionError(f"a group header {header:#04x} at byte {position}: widths are 0..{MAX_WIDTH}, then the mask bit")
        start = position + 1 + (2 * masked)
        if masked and start > len(data):
            raise CompressionError(f"the masked group at byte {position} ends before its mask")
        present = (np.unpackbits(data[position + 1 : start], bitorder="little").astype(bool) if masked
                   else np.ones(GROUP, bool))
        size = -(-int(present.sum()) * width // 8)
        if start + size > len(data):
            raise CompressionError(f"the group at byte {position} needs {start + size - position} bytes; the stream has "
                                   f"{len(data) - position}")
        codes = np.zeros(GROUP, np.int16)
        codes[present] = _unpacked(data[start : start + size], int(present.sum()), width)
        out.append(np.where(codes % 2 == 0, codes // 2, -(codes + 1) // 2).astype(np.int8))
        position = start + size
    return np.concatenate(out).tobytes()[:length] if out else b""


class CompressionError(ValueError):
    """A stream that is not this format."""
