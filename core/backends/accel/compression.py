"""Lossless compression of the constant segment's weights, decoded by the DMA as a compressed LOAD reads them
(core/backends/accel/isa.py: LOAD flag COMPRESSED; the C simulator's decoder: runtime/qt_isa.h qt_isa_unpack_weights).

The format: the raw bytes in groups of GROUP (the last one padded with zeros), each group a header byte, its low four
bits a width `w` in 0..8 and its top bit MASKED, then
- plain: the GROUP values zigzag-coded (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...) in `w` bits each, packed little-endian
  from the low bit: GROUP * w / 8 bytes;
- masked: a 16-bit little-endian mask of the values that are not zero, then those values alone, zigzag-coded in `w`
  bits each, packed likewise into whole bytes.
Or a header with bit RICE (0x40) covering `runs` (1..RUNS, bits 3-5: runs - 1) groups at once, its low three bits `k`:
- rice: each of the runs x GROUP values zigzag-coded, its code's quotient by 2^k in unary (that many 1 bits, then a 0
  bit), then its code's low k bits, low bit first; the bits packed little-endian from the low bit into whole bytes.
The compressor cuts the groups into the runs that make the stream smallest: a run of one group plain or masked, or
of up to RUNS groups as rice at its best k. A group of zeros (the channel padding of a layer whose channels are not a multiple of the block, pruned
weights) is its header alone; a group of a few values (a B x B block's row of one input channel) is its mask and those;
int8 weights of small magnitude take fewer than 8 bits; dense weights of a bell-shaped distribution (a fully connected
layer's), near their entropy, the Rice code. A decoder needs no table and keeps one run in flight."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

GROUP = 16  # values per group: GROUP * w bits is a whole number of bytes for every w, and a mask is 16 bits
MAX_WIDTH = 8
MASKED = 0x80
RICE = 0x40
RUNS = 8  # groups one Rice header covers, at most: bits 3-5 of its header, runs - 1
RUNS_SHIFT = 3
MAX_K = 7


def _zigzag(values: np.ndarray) -> np.ndarray:
    wide = values.astype(np.int16)
    return np.where(wide >= 0, 2 * wide, -2 * wide - 1).astype(np.uint16)


def _packed(codes: np.ndarray, width: int) -> bytes:
    """`codes` in `width` bits each, low bit first, in whole bytes."""
    if not width or not len(codes):
        return b""
    return np.packbits(((codes[:, None] >> np.arange(width)) & 1).astype(np.uint8).reshape(-1), bitorder="little").tobytes()


def _group(group: np.ndarray) -> bytes:
    """One group, plain or masked, whichever is smaller."""
    width = int(np.ceil(np.log2(float(group.max(initial=0)) + 1)))
    present = group != 0
    masked_size = 2 + -(-int(present.sum()) * width // 8)
    if width and masked_size < GROUP * width // 8:
        mask = int(np.packbits(present, bitorder="little").view("<u2")[0]).to_bytes(2, "little")
        return bytes([MASKED | width]) + mask + _packed(group[present], width)
    return bytes([width]) + _packed(group, width)


def _rice(codes: np.ndarray, k: int) -> bytes:
    """`codes` Rice-coded at k: each quotient in unary (1s, then a 0), then the low k bits; low bit first, whole bytes."""
    codes = codes.astype(np.int64)
    quotients = codes >> k
    lengths = quotients + 1 + k
    starts = np.cumsum(lengths) - lengths
    bits = np.zeros(int(lengths.sum()), np.uint8)
    ones = np.repeat(starts, quotients) + np.arange(int(quotients.sum())) - np.repeat(np.cumsum(quotients) - quotients, quotients)
    bits[ones] = 1
    for bit in range(k):
        bits[starts + quotients + 1 + bit] = (codes >> bit) & 1
    return np.packbits(bits, bitorder="little").tobytes()


@lru_cache(maxsize=64)
def compress(raw: bytes) -> bytes:
    """The stream of `raw` (int8 values): the groups cut into runs of 1..RUNS groups, each run rice at its best k or its
    groups each plain or masked, whichever is smaller; the cut the smallest (a shortest path over the groups). (Cached: a
    conv's candidate tiles store its weights once each.)"""
    values = np.frombuffer(raw, np.int8)
    padded = np.zeros(-(-len(values) // GROUP) * GROUP, np.int8)
    padded[: len(values)] = values
    codes = _zigzag(padded).reshape(-1, GROUP).astype(np.int64)
    count = len(codes)
    separate = [_group(group) for group in codes]
    # per group and k: the bits of its values Rice-coded at k
    rice_bits = np.stack([((codes >> k) + 1 + k).sum(axis=1) for k in range(MAX_K + 1)], axis=1)
    cumulative = np.vstack([np.zeros((1, MAX_K + 1), np.int64), np.cumsum(rice_bits, axis=0)])
    # per run length: for each run of that many groups ending at group end - 1, its bytes at its best k, and that k
    rice_runs = []
    for length in range(1, min(RUNS, count) + 1):
        bits = cumulative[length:] - cumulative[:-length]
        rice_runs.append(((1 + -(-bits.min(axis=1) // 8)).tolist(), bits.argmin(axis=1).tolist()))
    best = [(0, None)] * (count + 1)  # best[g]: the last run (start, k or None) of the smallest stream of the first g groups
    size = [0] * (count + 1)
    for end in range(1, count + 1):
        size[end], best[end] = size[end - 1] + len(separate[end - 1]), (end - 1, None)
        for length in range(1, min(RUNS, end) + 1):
            run_bytes, ks = rice_runs[length - 1]
            candidate = size[end - length] + run_bytes[end - length]
            if candidate < size[end]:
                size[end], best[end] = candidate, (end - length, ks[end - length])
    runs, end = [], count
    while end:
        start, k = best[end]
        runs.append((start, end, k))
        end = start
    out = bytearray()
    for start, end, k in reversed(runs):
        if k is None:
            out.extend(separate[start])
        else:
            out.append(RICE | (end - start - 1) << RUNS_SHIFT | k)
            out.extend(_rice(codes[start:end].reshape(-1), k))
    return bytes(out)


def _unpacked(data: np.ndarray, count: int, width: int) -> np.ndarray:
    if not width or not count:
        return np.zeros(count, np.int16)
    bits = np.unpackbits(data, bitorder="little")[: count * width].reshape(count, width)
    return (bits.astype(np.int16) << np.arange(width)).sum(axis=1)


def _unrice(data: np.ndarray, position: int, count: int, k: int) -> tuple[np.ndarray, int]:
    """`count` Rice codes at k from byte `position`: (the codes, the position after their last byte)."""
    bits = np.unpackbits(data[position:], bitorder="little")
    codes, bit = np.zeros(count, np.int16), 0
    for index in range(count):
        quotient = 0
        while bit < len(bits) and bits[bit]:
            quotient, bit = quotient + 1, bit + 1
            if quotient > 0xFF:
                raise CompressionError(f"the Rice run at byte {position - 1}: a code past the int8s' 255")
        if bit + 1 + k > len(bits):
            raise CompressionError(f"the Rice run at byte {position - 1} ends before its {count} values")
        bit += 1
        code = quotient << k | int((bits[bit : bit + k].astype(np.int64) << np.arange(k)).sum())
        if code > 0xFF:
            raise CompressionError(f"the Rice run at byte {position - 1}: a code past the int8s' 255 ({code})")
        codes[index], bit = code, bit + k
    return codes, position + -(-bit // 8)


def decompress(stream: bytes, length: int) -> bytes:
    """The first `length` raw bytes of a stream (CompressionError where it is not one)."""
    data = np.frombuffer(stream, np.uint8)
    out, position, decoded = [], 0, 0
    while decoded < length:
        if position >= len(data):
            raise CompressionError(f"the stream ends after {position} bytes, before {length} bytes were decoded")
        header = int(data[position])
        if header & RICE:
            if header & MASKED:
                raise CompressionError(f"a Rice header {header:#04x} at byte {position}: with the mask bit")
            runs = (header >> RUNS_SHIFT & 0x07) + 1
            codes, position = _unrice(data, position + 1, runs * GROUP, header & MAX_K)
        else:
            codes, position = _plain_or_masked(data, position)
        out.append(np.where(codes % 2 == 0, codes // 2, -(codes + 1) // 2).astype(np.int8))
        decoded += len(codes)
    return np.concatenate(out).tobytes()[:length] if out else b""


def _plain_or_masked(data: np.ndarray, position: int) -> tuple[np.ndarray, int]:
    """One plain or masked group at byte `position`: (its codes, the position after it)."""
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
    return codes, start + size


class CompressionError(ValueError):
    """A stream that is not this format."""
