"""conv's and dwconv's fast kernels: the reference kernels' integers (kernel.py), sooner.

The reference multiplies one tap at a time over a tile of the whole batch, ten numpy passes
over the data per 3x3 window, and was 75% of the simulator's time on mbv1_cifar10. Here each
output row is one compiled loop: per pixel, the channels' int32 accumulators start at the
offset (bias << bias_shift + the rounding constant), take each tap's int8 x int8 products,
shift right (floor), clamp and saturate. One thread: the simulator runs a share of the batch
on each core. int32 is exact where the
record's accumulator bound (|sum of products| + |offset| <= bound, in any order of
addition) is at most 2^31 - 1: the proven case, the only one this path takes; a layer whose
bound exceeds it runs the reference kernel. tests/test_ops_conv.py checks the two agree.
"""

from __future__ import annotations

import numba
import numpy as np

from core.ir.ops.conv.kernel import _prepared, conv_kernel, dwconv_kernel
from core.ir.ops.conv.record import ConvLayer

GEMM_ROWS = 1 << 14  # output pixels per pointwise GEMM: float32 buffers of at most 64 KiB per channel


@numba.njit(cache=True, nogil=True)
def _dwconv_rows(padded, weight, offset, shift, low, high, strides, dilations, out, first, stop):  # pragma: no cover  (compiled)
    """Output rows [first, stop) of the batch (row = image * OH + oh) into `out` [N, OH, OW, C]."""
    channels = padded.shape[3]
    kernel_h, kernel_w, _ = weight.shape
    out_h, out_w = out.shape[1], out.shape[2]
    acc = np.empty(channels, np.int32)
    for row in range(first, stop):
        image, oh = row // out_h, row % out_h
        for ow in range(out_w):
            for c in range(channels):
                acc[c] = offset[c]
            for i in range(kernel_h):
                for j in range(kernel_w):
                    # 1-d views: the channel loop vectorizes (int8 widened, int32 multiply-add)
                    source = padded[image, oh * strides[0] + i * dilations[0], ow * strides[1] + j * dilations[1]]
                    tap = weight[i, j]
                    for c in range(channels):
                        acc[c] += np.int32(source[c]) * tap[c]
            target = out[image, oh, ow]
            for c in range(channels):
                target[c] = min(max(acc[c] >> shift, low), high)


def dwconv_fast_kernel(record: ConvLayer, params: dict, inputs: list) -> np.ndarray:
    """dwconv_kernel's output, compiled where int32 accumulators are proven exact."""
    x, weight, geometry, plan = _prepared(record, params, inputs)
    if plan.int_dtype != np.int32:  # the bound does not prove int32: the reference checks as it goes
        return dwconv_kernel(record, params, inputs)
    top, bottom, left, right = geometry.pads
    padded = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    strides, dilations = np.array([geometry.sh, geometry.sw]), np.array([geometry.dh, geometry.dw])
    out = np.empty((geometry.n, geometry.out_h, geometry.out_w, x.shape[3]), np.int8)
    _dwconv_rows(padded, weight.astype(np.int32), plan.offset.astype(np.int32), np.int32(plan.shift), np.int32(plan.low),
                 np.int32(plan.high), strides, dilations, out, 0, geometry.n * geometry.out_h)
    return out


def conv_fast_kernel(record: ConvLayer, params: dict, inputs: list) -> np.ndarray:
    """conv_kernel's output; a pointwise conv (1x1, stride 1, no padding) on the float32 path
    without im2col: the input is already the GEMM's [pixels, Ci] operand."""
    x, weight, geometry, plan = _prepared(record, params, inputs)
    pointwise = weight.shape[:2] == (1, 1) and (geometry.sh, geometry.sw) == (1, 1) and not any(geometry.pads)
    if not (pointwise and plan.float32):
        return conv_kernel(record, params, inputs)
    channels_in, channels_out = weight.shape[2], weight.shape[3]
    scaled_weight = weight.reshape(channels_in, channels_out).astype(np.float32) * plan.scale  # exact: a power of two
    offset = plan.scaled_offset()
    pixels = x.reshape(-1, channels_in)
    out = np.empty((len(pixels), channels_out), np.int8)
    for start in range(0, len(pixels), GEMM_ROWS):
        # every product and partial sum is an integer times 2^-output_shift of magnitude <= 2^24: exact
        scaled = pixels[start : start + GEMM_ROWS].astype(np.float32) @ scaled_weight
        np.add(scaled, offset, out=scaled)
        plan.finish_float(scaled, out[start : start + GEMM_ROWS])
    return out.reshape(geometry.n, geometry.out_h, geometry.out_w, channels_out)
