"""The integer kernels of conv and dwconv, as the simulator runs them: int8 NHWC batches in,
int8 NHWC out, the exact sums requantized as conv/requantize.py says.

The padded input is held flattened to rows: image n, padded row y is row n * Hp' + y of a
[N * Hp', Wp * C] array (Hp' = the padded height rounded up to a multiple of the stride,
extra rows zero). Output row oh of image n is row r = n * Hq + oh (Hq = Hp' / stride) of the
output, and reads input rows r * stride + i * dilation: for a block of output rows each kernel
row i is one strided slice, so the work is vectorized over the batch. The Hq - OH rows
between images are computed and dropped. Rows are processed in tiles of about TILE_BYTES
(cache locality: large vectorized steps, never one image or pixel at a time), taps in a loop.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from core.ir.fixedpoint import FLOAT32_EXACT_INT, GEMM_MAX_K, INT8_PRODUCT_MAX
from core.ir.ops.conv.affine import conv_affine, fully_connected_affine
from core.ir.ops.conv.affine_fast import conv_affine_fast
from core.ir.ops.conv.record import ConvLayer
from core.ir.ops.conv.requantize import Requantize
from core.quantize.runtimes import DOUBLE_ROUNDING

TILE_BYTES = 1 << 21


def _pads_strides(record: ConvLayer) -> tuple[list[int], list[int], list[int], list[int]]:
    return (record.padding.as_list(), list(record.stride.pair()), list(record.dilations.pair()), list(record.kernel_size.pair()))


class _Geometry:
    def __init__(self, shape, kernel, pads, strides, dilations):
        n, h, w, c = (int(v) for v in shape)
        (self.kh, self.kw), (self.sh, self.sw), (self.dh, self.dw) = kernel, strides, dilations
        if min(self.sh, self.sw, self.dh, self.dw, self.kh, self.kw) < 1 or min(pads) < 0:
            raise ValueError(f"kernel {kernel}, strides {strides}, dilations {dilations}, padding {pads}: invalid")
        self.n, self.h, self.w, self.c, self.pads = n, h, w, c, [int(p) for p in pads]
        hp, self.wp = h + pads[0] + pads[1], w + pads[2] + pads[3]
        self.out_h = (hp - (self.kh - 1) * self.dh - 1) // self.sh + 1
        self.out_w = (self.wp - (self.kw - 1) * self.dw - 1) // self.sw + 1
        if self.out_h < 1 or self.out_w < 1:
            raise ValueError(f"input {h}x{w} with padding {pads} is smaller than the kernel {kernel} dilated by {dilations}")
        self.hq = -(-hp // self.sh)  # output rows per image, valid or not
        self.rows = (n - 1) * self.hq + self.out_h if n else 0  # output rows computed (to the last valid one)

    def padded(self, x: np.ndarray, dtype, column_phases: bool = False) -> list[np.ndarray]:
        """The zero-padded input as `dtype`, flattened to rows [N * Hp', Wp * C]; with
        column_phases, one such array per column phase q (padded columns q, q + sw, ...)."""
        top, _, left, _ = self.pads
        rows = self.hq * self.sh
        phases = self.sw if column_phases else 1
        if rows == self.h and self.wp == self.w and phases == 1:
            return [x.astype(dtype, copy=False).reshape(self.n * self.h, self.w * self.c)]
        result = []
        for q in range(phases):  # padded column q + k * phases holds input column q + k * phases - left
            first = (q - left) % phases  # the first input column of this phase
            width = -(-(self.wp - q) // phases)
            phase = np.zeros((self.n, rows, width, self.c), dtype)
            if first < self.w:
                columns = x[:, :, first::phases, :]
                start = (first + left - q) // phases
                phase[:, top : top + self.h, start : start + columns.shape[2], :] = columns
            result.append(phase.reshape(self.n * rows, width * self.c))
        return result

    def input_rows(self, start: int, stop: int, i: int) -> slice:
        """The input rows kernel row i reads for output rows [start, stop)."""
        first = start * self.sh + i * self.dh
        return slice(first, first + (stop - start - 1) * self.sh + 1, self.sh)

    def tiles(self, row_bytes: int):
        """[start, stop) tiles of the output rows, about TILE_BYTES each at `row_bytes` per row."""
        step = max(1, TILE_BYTES // max(row_bytes, 1))
        for start in range(0, self.rows, step):
            yield start, min(start + step, self.rows)

    def valid(self, rows: np.ndarray) -> np.ndarray:
        """[rows, ...] computed output rows -> [N, OH, ...], dropping the rows between images."""
        tail = rows.shape[1:]
        if self.hq == self.out_h:
            return rows.reshape((self.n, self.out_h) + tail)
        full = np.empty((self.n * self.hq,) + tail, rows.dtype)
        full[: self.rows] = rows
        return np.ascontiguousarray(full.reshape((self.n, self.hq) + tail)[:, : self.out_h])



# --- conv -----------------------------------------------------------------------------------------


def exact_gemm(cols: np.ndarray, weight: np.ndarray, dtype) -> np.ndarray:
    """cols [M, K] @ weight [K, Co] of int8 values (held as float32) -> the exact integer
    products in `dtype`: float32 GEMMs over chunks of at most GEMM_MAX_K reduction elements
    (each exact: |partial sums| <= GEMM_MAX_K * 2^14 <= 2^24), added in `dtype`."""
    reduction = cols.shape[1]
    acc = None
    for start in range(0, reduction, GEMM_MAX_K):
        stop = min(start + GEMM_MAX_K, reduction)
        if (stop - start) * INT8_PRODUCT_MAX > FLOAT32_EXACT_INT:  # pragma: no cover  (by construction)
            raise AssertionError(f"a float32 GEMM chunk of {stop - start} int8 products is not exact")
        part = np.matmul(cols[:, start:stop], weight[start:stop])
        if acc is None:
            acc = part.astype(dtype)
        else:
            np.add(acc, part, out=acc, casting="unsafe")  # exact integers: the cast is exact
    return acc


def _im2col_tiles(xp: np.ndarray, kernel_shape, geometry: _Geometry, ones_column: bool):
    """(start, stop, cols [(stop - start) * OW, K (+ 1)] float32) per tile of output rows:
    cols[., (i * KW + j) * C + ci] = the padded input `xp` ([N * Hp', Wp * C] int8)
    at tap (i, j), channel ci (HWCi order, as the HWCiCo weight flattens); with ones_column a
    last column of 1.0 (for a folded offset)."""
    kh, kw, c = kernel_shape
    reduction = kh * kw * c
    ow, sw, dw = geometry.out_w, geometry.sw, geometry.dw
    item = xp.itemsize
    buffer = None
    for start, stop in geometry.tiles(geometry.out_w * (reduction + 1) * 4):
        rows = stop - start
        if buffer is None:
            buffer = np.empty((rows, ow, reduction + ones_column), np.float32)
            if ones_column:
                buffer[:, :, reduction] = 1.0
        cols = buffer[:rows]
        for i in range(kh):
            source = xp[geometry.input_rows(start, stop, i)]
            if dw == 1:  # the kernel row's KW taps are KW * C consecutive elements
                window = np.lib.stride_tricks.as_strided(source, (rows, ow, kw * c), (source.strides[0], sw * c * item, item),
                                                         writeable=False)
                cols[:, :, i * kw * c : (i + 1) * kw * c] = window  # int8 -> float32, exact
                continue
            for j in range(kw):
                window = np.lib.stride_tricks.as_strided(source[:, j * dw * c :], (rows, ow, c),
                                                         (source.strides[0], sw * c * item, item), writeable=False)
                cols[:, :, (i * kw + j) * c : (i * kw + j + 1) * c] = window
        yield start, stop, cols.reshape(rows * ow, -1)


def conv_accumulator(x: np.ndarray, weight: np.ndarray, pads, strides, dilations, dtype=np.int32) -> np.ndarray:
    """The int8 convolution's accumulator, [N, OH, OW, Co] in `dtype`, exact: the sum over each
    window of x * w with zero padding. x int8 NHWC, weight int8 HWIO (HWCiCo). im2col tiles and
    exact_gemm (float32 GEMMs of at most GEMM_MAX_K products, added in `dtype`)."""
    geometry = _Geometry(x.shape, weight.shape[:2], pads, strides, dilations)
    if weight.shape[2] != x.shape[3]:
        raise ValueError(f"weight of shape {list(weight.shape)} for {x.shape[3]} input channels")
    co = weight.shape[3]
    wmat = weight.reshape(-1, co).astype(np.float32)
    rows = np.empty((geometry.rows, geometry.out_w, co), dtype)
    (xp,) = geometry.padded(np.ascontiguousarray(x), np.int8)
    for start, stop, cols in _im2col_tiles(xp, weight.shape[:3], geometry, False):
        rows[start:stop] = exact_gemm(cols, wmat, dtype).reshape(stop - start, geometry.out_w, co)
    return geometry.valid(rows)


def conv_kernel(record: ConvLayer, params: dict, inputs: list) -> np.ndarray:
    """conv: int8 NHWC [N, H, W, Ci] -> int8 NHWC [N, OH, OW, Co], as the hardware computes it:
    the exact int32 sum of int8 input x int8 weight (HWCiCo) over each window, zero padding,
    then requantize (bias << bias_shift, >> output_shift rounded half up, the activation's
    clamp, saturation).

    im2col tiles and float32 GEMMs. Float32 path (when |sum| + |offset| <= 2^24): one GEMM with
    the weights times 2^-output_shift and the offset * 2^-output_shift as an extra row against
    a ones column, exact, then clip and floor. Otherwise exact_gemm (GEMM_MAX_K chunks) and
    the integer requantize."""
    x, weight, geometry, plan = _prepared(record, params, inputs)
    co = weight.shape[3]
    reduction = int(np.prod(weight.shape[:3]))
    rows = np.empty((geometry.rows, geometry.out_w, co), np.int8)
    (xp,) = geometry.padded(x, np.int8)  # int8: the im2col copy casts
    if plan.float32:
        wmat = np.empty((reduction + 1, co), np.float32)
        wmat[:reduction] = weight.reshape(reduction, co).astype(np.float32) * plan.scale  # exact: a power of two
        wmat[reduction] = plan.scaled_offset()
        product = None
        for start, stop, cols in _im2col_tiles(xp, weight.shape[:3], geometry, True):
            if product is None:
                product = np.empty((cols.shape[0], co), np.float32)
            scaled = np.matmul(cols, wmat, out=product[: cols.shape[0]])
            plan.finish_float(scaled, rows[start:stop].reshape(-1, co))
    else:
        wmat = weight.reshape(reduction, co).astype(np.float32)
        for start, stop, cols in _im2col_tiles(xp, weight.shape[:3], geometry, False):
            plan.finish_int(exact_gemm(cols, wmat, plan.int_dtype), rows[start:stop].reshape(-1, co), plan.offset)
    return geometry.valid(rows)


# --- dwconv ---------------------------------------------------------------------------------------


def _dwconv_tiles(phases: list, weight: np.ndarray, geometry: _Geometry, dtype, scale=None):
    """(start, stop, acc [stop - start, OW * C]) per tile of output rows: per tap,
    the tile's slice of the padded input's column phase (`phases`, from geometry.padded) x the
    tap's weights (tiled along OW, times `scale` when given) accumulated. float32 (scale
    given): exact while the sums stay within 2^24 (the caller's bound); int: the products in
    int16 (|int8 x int8| <= 2^14), accumulated in `dtype`."""
    kh, kw, c = weight.shape
    ow, sw, dw = geometry.out_w, geometry.sw, geometry.dw
    floating = scale is not None
    w = weight.astype(np.float32) * scale if floating else weight.astype(np.int16)
    tiled = np.tile(w, (1, 1, ow))  # [KH, KW, OW * C]
    product_dtype = np.float32 if floating else np.int16
    acc_buffer = product = None
    for start, stop in geometry.tiles(ow * c * 4):
        rows = stop - start
        if acc_buffer is None:
            acc_buffer, product = np.empty((rows, ow * c), dtype), np.empty((rows, ow * c), product_dtype)
        acc, prod = acc_buffer[:rows], product[:rows]
        for i in range(kh):
            for j in range(kw):
                phase, column = (j * dw) % sw, (j * dw) // sw * c
                tap = phases[phase][geometry.input_rows(start, stop, i), column : column + ow * c]
                if i == 0 and j == 0:
                    np.multiply(tap, tiled[i, j], out=acc, dtype=product_dtype, casting="unsafe")
                else:
                    np.multiply(tap, tiled[i, j], out=prod, dtype=product_dtype)
                    np.add(acc, prod, out=acc)
        yield start, stop, acc


def dwconv_accumulator(x: np.ndarray, weight: np.ndarray, pads, strides, dilations, dtype=np.int32) -> np.ndarray:
    """The int8 depthwise convolution's accumulator, [N, OH, OW, C] in `dtype`, exact. x int8
    NHWC, weight int8 HWC."""
    geometry = _Geometry(x.shape, weight.shape[:2], pads, strides, dilations)
    if weight.shape[2] != x.shape[3]:
        raise ValueError(f"weight of shape {list(weight.shape)} for {x.shape[3]} channels")
    rows = np.empty((geometry.rows, geometry.out_w * x.shape[3]), dtype)
    phases = geometry.padded(np.ascontiguousarray(x), np.int16, column_phases=True)
    for start, stop, acc in _dwconv_tiles(phases, weight, geometry, dtype):
        rows[start:stop] = acc
    return geometry.valid(rows).reshape(x.shape[0], geometry.out_h, geometry.out_w, x.shape[3])


def dwconv_kernel(record: ConvLayer, params: dict, inputs: list) -> np.ndarray:
    """dwconv: int8 NHWC [N, H, W, C] -> int8 NHWC [N, OH, OW, C]: per channel, the exact int32
    sum of int8 input x int8 weight (HWC) over each window, zero padding, then requantize as conv.
    One multiply-accumulate per kernel tap, vectorized over a tile of rows of the whole batch;
    float32 (weights times 2^-output_shift, exact while |sum| + |offset| <= 2^24) or int16
    products accumulated in int32."""
    x, weight, geometry, plan = _prepared(record, params, inputs)
    c = x.shape[3]
    rows = np.empty((geometry.rows, geometry.out_w * c), np.int8)
    phases = geometry.padded(x, np.float32 if plan.float32 else np.int16, column_phases=True)
    if plan.float32:
        offset = np.tile(plan.scaled_offset(), geometry.out_w)  # along the [OW * C] rows
        for start, stop, acc in _dwconv_tiles(phases, weight, geometry, np.float32, plan.scale):
            np.add(acc, offset, out=acc)
            plan.finish_float(acc, rows[start:stop])
    else:
        offset = np.tile(plan.offset, geometry.out_w)
        for start, stop, acc in _dwconv_tiles(phases, weight, geometry, plan.int_dtype):
            plan.finish_int(acc, rows[start:stop], offset)
    return geometry.valid(rows).reshape(x.shape[0], geometry.out_h, geometry.out_w, c)


def conv_affine_kernel(record: ConvLayer, params: dict, inputs: list) -> np.ndarray:
    """TFLite's arithmetic (a ChannelRequantization) as its reference kernels compute it: affine.py's integers."""
    (values,) = inputs
    requantization, bias = record.requantization, params.get("bias")
    multipliers, shifts = params["multiplier"].astype(np.int64), params["shift"].astype(np.int64)
    if record.dense:
        weight = params["weight"].reshape(record.output_channel_num, -1)
        result = fully_connected_affine(values, requantization.input_zero_point, weight, bias, multipliers, shifts,
                                        requantization.output_zero_point, requantization.clamp, requantization.rounding)
        return result.reshape(len(values), *record.shape_of_output())
    padding = record.padding
    convolution = conv_affine_fast if requantization.rounding == DOUBLE_ROUNDING else partial(conv_affine, rounding=requantization.rounding)
    return convolution(values, requantization.input_zero_point, params["weight"], bias, multipliers, shifts,
                       requantization.output_zero_point, requantization.clamp, record.stride.pair(), record.dilations.pair(),
                       (padding.top, padding.bottom, padding.left, padding.right), depthwise=record.depthwise)


# --- checks ---------------------------------------------------------------------------------------


def _prepared(record: ConvLayer, params: dict, inputs: list) -> tuple[np.ndarray, np.ndarray, _Geometry, Requantize]:
    """One call's checked input and weight (conv HWCiCo, dwconv HWC), geometry and requantize plan."""
    x = _check_input(record, inputs)
    pads, strides, dilations, kernel = _pads_strides(record)
    weight = _int8_weight(params, 3 if record.depthwise else 4, kernel, record.operation)
    if weight.shape[2] != x.shape[3]:
        raise ValueError(f"{record.operation} weight of shape {list(weight.shape)} for {x.shape[3]} "
                         f"{'channels' if record.depthwise else 'input channels'}")
    geometry = _Geometry(x.shape, kernel, pads, strides, dilations)
    _check_output(record, geometry, x.shape[3] if record.depthwise else weight.shape[3])
    return x, weight, geometry, Requantize.of(record, params)


def _check_input(record: ConvLayer, inputs: list) -> np.ndarray:
    if len(inputs) != 1:
        raise ValueError(f"a conv takes one input, got {len(inputs)}")
    x = np.asarray(inputs[0])
    if x.dtype != np.int8:
        raise TypeError(f"input of dtype {x.dtype}; the kernel takes int8")
    expected = list(record.shape_of_input(0))
    if x.ndim != 4 or list(x.shape[1:]) != expected:
        raise ValueError(f"input of shape {list(x.shape)}; the layer takes [N, {expected[0]}, {expected[1]}, {expected[2]}]")
    return np.ascontiguousarray(x)


def _check_output(record: ConvLayer, geometry: _Geometry, channels: int) -> None:
    expected = list(record.shape_of_output())
    if [geometry.out_h, geometry.out_w, channels] != expected:
        raise ValueError(f"the geometry gives an output of {[geometry.out_h, geometry.out_w, channels]}; "
                         f"output_size/output_channel_num say {expected}")


def _int8_weight(params: dict, ndim: int, kernel: list[int], what: str) -> np.ndarray:
    weight = np.asarray(params["weight"])
    if weight.ndim != ndim or list(weight.shape[:2]) != kernel or weight.dtype != np.int8:
        raise ValueError(f"{what} weight of shape {list(weight.shape)} ({weight.dtype}); kernel_size is {kernel}")
    return weight


