"""The host C of the tflite_int8 dialect (core/backends/c/ops/affine_*.py, runtime/qt_tflite.h) against the
dialect's kernels (core/ir/ops/*/kernel.py, themselves checked against TFLite's reference kernels in
tests/test_tflite.py), at the arithmetic's extremes: zero points -128 and 127, multipliers at 2^30 and near
2^31, shifts from -31 to left shifts that wrap int32, saturating clamps."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from core.backends.c.build import compile_program
from core.backends.c.program import RUNTIME_HEADERS
from core.ir.op import operation_of
from core.ir.common_scale import common_scale_multipliers
from core.ir.ops.lut.affine import lookup_table
from core.quantize.tflite_math import multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_single_rounding, quantize_multiplier
from harness import c_output, one_layer_ir, run_on_simd_paths, skip_unless_the_cpu_runs_a_simd_path

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SCHEME = {"scheme": "tflite_int8"}


def test_the_c_requantization_is_tflite_maths_at_its_extremes(tmp_path):
    rng = np.random.default_rng(0)
    xs = np.concatenate([[0, 1, -1, INT32_MIN, INT32_MAX, INT32_MIN + 1, 2**30, -(2**30)], rng.integers(INT32_MIN, INT32_MAX, 200)])
    multipliers = np.array([0, 2**30, 2**30 + 1, INT32_MAX - 1, INT32_MAX, 1518500250, INT32_MIN])
    shifts = np.array([-31, -30, -17, -1, 0, 1, 7, 30])
    x, m, s = (a.ravel() for a in np.meshgrid(xs, multipliers, shifts, indexing="ij"))
    for header in RUNTIME_HEADERS:
        (tmp_path / header.name).write_text(header.read_text())
    (tmp_path / "driver.c").write_text("""#include <stdio.h>
#include "qt_runtime.h"
int main(void)
{
    long long x, m; int s;
    while (scanf("%lld %lld %d", &x, &m, &s) == 3)
        printf("%lld %lld\\n", (long long)qt_mbqm(x, m, s), s <= 30 && m >= 0 ? (long long)qt_mbqm_single(x, m, s) : 0LL);
    return 0;
}
""")
    binary = compile_program(tmp_path / "driver.c", tmp_path / "driver")
    lines = "".join(f"{a} {b} {c}\n" for a, b, c in zip(x, m, s))
    printed = np.array(subprocess.run([str(binary)], input=lines, capture_output=True, text=True, check=True).stdout.split(), np.int64)
    double, single = printed[0::2], printed[1::2]
    np.testing.assert_array_equal(double, multiply_by_quantized_multiplier(x, m, s))
    nonnegative = m >= 0
    np.testing.assert_array_equal(single[nonnegative], multiply_by_quantized_multiplier_single_rounding(x, m, s)[nonnegative])


def _size(height, width) -> dict:
    return {"height": height, "width": width}


def _window(height, width, channels, out_h, out_w, out_c, kernel, stride=(1, 1), padding=(0, 0, 0, 0)) -> dict:
    top, bottom, left, right = padding
    return {"input_size": _size(height, width), "input_channel_num": channels, "output_size": _size(out_h, out_w),
            "output_channel_num": out_c, "kernel_size": _size(*kernel), "stride": _size(*stride),
            "padding": {"top": top, "bottom": bottom, "left": left, "right": right}}


def _quantization(input_zero, output_zero, input_scale=0.05, output_scale=0.1) -> dict:
    return {"input_scale": input_scale, "input_zero_point": input_zero, "output_scale": output_scale, "output_zero_point": output_zero}


def _conv_case(rng, depthwise: bool, rounding: str, zero_points, pointwise: bool = False, dense: bool = False):
    """A 3x3 conv (stride 2 x 1, one-sided padding, K = 27 off the SIMD path's multiple of 4), a 1x1 one of 20
    outputs (qt_gemm.h's direct path, two blocks of 16 channels, the second partial), a depthwise or a dense one (rounding
    once, as LiteRT's FULLY_CONNECTED, or twice, as TFLite Micro's)."""
    dense = dense or rounding == "single"
    height, width, channels = (1, 1, 40) if dense else (5, 4, 8) if pointwise else (7, 6, 3)
    outputs = channels * 2 if depthwise else 20 if pointwise else 6
    kernel, stride, padding = (((1, 1), (1, 1), (0, 0, 0, 0)) if dense or pointwise
                               else ((3, 3), (2, 1), (1, 0, 1, 1)))
    out_h = (height + padding[0] + padding[1] - kernel[0]) // stride[0] + 1
    out_w = (width + padding[2] + padding[3] - kernel[1]) // stride[1] + 1
    fields = {"operation": "dwconv" if depthwise else "conv", **SCHEME, **_quantization(*zero_points), "output_min": -128,
              "output_max": 120, "rounding": rounding, "load_bias": True, "dilations": _size(1, 1),
              **_window(height, width, channels, out_h, out_w, outputs, kernel, stride, padding)}
    weight_shape = (1, *kernel, outputs) if depthwise else (outputs, *kernel, channels)
    # most channels scaled into int8's range; one shifted right by 31 (to the zero point), one left by 2 (wrapping int32)
    multipliers = np.resize(np.array([2**30, INT32_MAX, 1518500250, 1073741825, INT32_MAX - 1, 2**30]), outputs).astype(np.int32)
    shifts = np.resize(np.array([-10, -31, -9, 2, -11, -8] if rounding == "double" or depthwise else [-10, -31, -9, -7, -11, -8]),
                       outputs).astype(np.int32)
    if depthwise or pointwise:  # nine or eight products, not 27: sums three times smaller
        shifts = np.where(shifts < -2, shifts + 2, shifts).astype(np.int32)
    params = {"weight": rng.integers(-127, 128, weight_shape).astype(np.int8), "bias": rng.integers(-2**14, 2**14, outputs).astype(np.int32),
              "multiplier": multipliers, "shift": shifts}
    return fields, params, [rng.integers(-128, 128, (5, height, width, channels)).astype(np.int8)]


def _elementwise_cases(rng) -> dict:
    cases = {}
    shape = [4, 5, 3]
    images = lambda shape: rng.integers(-128, 128, (5, *shape)).astype(np.int8)  # noqa: E731
    for zero_points in ((-128, 127), (127, -128)):
        (m0, s0), (m1, s1), (mo, so) = common_scale_multipliers(0.02, 0.5, 0.3)
        cases[f"add zero points {zero_points}"] = (
            {"operation": "add", **SCHEME, "shape": shape, "input_scales": [0.02, 0.5], "input_zero_points": list(zero_points),
             "input_multipliers": [m0, m1], "input_shifts": [s0, s1], "left_shift": 20, "output_multiplier": mo, "output_shift": so,
             "output_scale": 0.3, "output_zero_point": zero_points[1], "output_min": -100, "output_max": 127}, {},
            [images(shape), images(shape)])
        multiplier, shift = quantize_multiplier(0.02 * 0.5 / 5.0)
        same = [zero_points[0]] * 2  # (q0 - z) (q1 - z) >= 0 for z at either end: the output from -128 up
        mul = {"operation": "mul", **SCHEME, "shape": shape, "input_scales": [0.02, 0.5], "input_zero_points": same,
               "multiplier": multiplier, "shift": shift, "output_scale": 5.0, "output_zero_point": -128, "output_min": -128,
               "output_max": 127}
        cases[f"mul broadcast {zero_points}"] = ({**mul, "input_shapes": [shape, [1, 1, 3]], "load_constant": False}, {},
                                                 [images(shape), images([1, 1, 3])])
        cases[f"mul by a constant {zero_points}"] = ({**mul, "input_shapes": [shape, [1, 5, 1]], "load_constant": True},
                                                     {"constant": rng.integers(-128, 128, (1, 5, 1)).astype(np.int8)}, [images(shape)])
        cases[f"lut {zero_points}"] = ({"operation": "lut", **SCHEME, "shape": shape, "function": "TANH",
                                        **_quantization(zero_points[0], zero_points[0], 0.01, 1 / 128)},
                                       {"table": lookup_table("TANH", 0.01, zero_points[0], 1 / 128, zero_points[0])}, [images(shape)])
    cases["concat along width"] = ({"operation": "concat", **SCHEME, "axis": 1, "input_shapes": [[4, 2, 3], [4, 5, 3]], "shape": [4, 7, 3],
                                    "output_scale": 0.1, "output_zero_point": -7}, {}, [images([4, 2, 3]), images([4, 5, 3])])
    multiplier, shift = quantize_multiplier(0.02 * 0.05 / 0.3)
    for adj_x, adj_y in ((False, False), (False, True), (True, False), (True, True)):
        # a batch of 2 heads against one broadcast (the second operand's batch axis 1), rows 3, depth 4, columns 5
        first, second = [2, 4, 3] if adj_x else [2, 3, 4], [1, 5, 4] if adj_y else [1, 4, 5]
        cases[f"batch_matmul adj {adj_x} {adj_y}"] = (
            {"operation": "batch_matmul", **SCHEME, "input_shapes": [first, second], "output_shape": [2, 3, 5], "adj_x": adj_x,
             "adj_y": adj_y, "input_scales": [0.02, 0.05], "input_zero_points": [-128, 127] if adj_x else [7, -3],
             "multiplier": multiplier, "shift": shift, "output_scale": 0.3, "output_zero_point": -9, "output_min": -128,
             "output_max": 127}, {}, [images(first), images(second)])
    # attention's probabilities by its values as MiT's (SegFormer's) reduced keys make them: a depth of 4, 16 columns
    # apart; GCC 12.2 at -O2 miscompiled the loop nest of this shape when it vectorized the loop over columns
    first, second = [2, 16, 4], [2, 4, 16]
    cases["batch_matmul of attention's probabilities"] = (
        {"operation": "batch_matmul", **SCHEME, "input_shapes": [first, second], "output_shape": [2, 16, 16], "adj_x": False,
         "adj_y": False, "input_scales": [1 / 256, 0.0346], "input_zero_points": [-128, 0], "multiplier": 1090409623, "shift": -7,
         "output_scale": 0.034, "output_zero_point": -1, "output_min": -128, "output_max": 127}, {}, [images(first), images(second)])
    cases["transpose"] = ({"operation": "transpose", **SCHEME, "permutation": [1, 2, 0], "input_shape": shape, "output_shape": [5, 3, 4],
                           "output_scale": 0.1, "output_zero_point": 3}, {}, [images(shape)])
    cases["reshape"] = ({"operation": "reshape", **SCHEME, "input_shape": shape, "output_shape": [60], "output_scale": 0.1,
                         "output_zero_point": 3}, {}, [images(shape)])
    # softmax's fixed point at scales whose multiplier is capped (large), ordinary, and where diff_min skips most of a
    # row; ResNet-8's under minmax (0.1803, zero point 19), where a float table was 1 LSB off
    for input_scale, zero_point, beta in ((0.3, 127, 1.0), (0.18032637, 19, 1.0), (0.004, -128, 2.0), (40.0, 0, 1.0)):
        cases[f"softmax {input_scale}"] = ({"operation": "softmax", **SCHEME, "shape": [3, 10], **_quantization(zero_point, -128, input_scale, 1 / 256),
                                            "beta": beta}, {}, [images([3, 10])])
    return cases


def _window_cases(rng) -> dict:
    images = rng.integers(-128, 128, (5, 7, 6, 3)).astype(np.int8)
    pooled = {**SCHEME, **_quantization(-128, -128, 0.1, 0.1), "output_min": -128, "output_max": 100}
    multiplier, shift = quantize_multiplier(0.1 / 0.5)
    cases = {
        "avg_pool 3x3/2 padded": ({"operation": "avg_pool", **pooled, **_window(7, 6, 3, 4, 3, 3, (3, 3), (2, 2), (1, 1, 0, 1))}, {}, [images]),
        "max_pool 2x2/2": ({"operation": "max_pool", **pooled, **_window(7, 6, 3, 3, 3, 3, (2, 2), (2, 2))}, {}, [images]),
        "mean": ({"operation": "avg_pool", **SCHEME, **_quantization(127, 0, 0.1, 0.5), "output_min": -128, "output_max": 127,
                  "multiplier": multiplier, "shift": shift, **_window(7, 6, 3, 1, 1, 3, (7, 6))}, {}, [images]),
        "crop": ({"operation": "crop", **SCHEME, "output_scale": 0.1, "output_zero_point": -77, "input_size": _size(7, 6),
                  "input_channel_num": 3, "output_size": _size(4, 1), "output_channel_num": 3,
                  "crop": {"top": 2, "bottom": 1, "left": 3, "right": 2}}, {}, [images]),
        "pad": ({"operation": "pad", **SCHEME, "output_scale": 0.1, "output_zero_point": -77, "input_size": _size(7, 6),
                 "input_channel_num": 3, "output_size": _size(9, 7), "output_channel_num": 3,
                 "padding": {"top": 2, "bottom": 0, "left": 0, "right": 1}}, {}, [images]),
    }
    for operation in ("resize_nearest", "resize_bilinear"):
        for align_corners, half_pixel_centers in ((False, False), (True, False), (False, True)):
            cases[f"{operation} {align_corners} {half_pixel_centers}"] = (
                {"operation": operation, **SCHEME, "output_scale": 0.1, "output_zero_point": 5, "input_size": _size(7, 6),
                 "input_channel_num": 3, "output_size": _size(13, 17), "output_channel_num": 3, "align_corners": align_corners,
                 "half_pixel_centers": half_pixel_centers}, {}, [images])
    return cases


def _cases() -> dict:
    rng = np.random.default_rng(7)
    cases = {}
    for depthwise, rounding in ((False, "double"), (True, "double"), (False, "single")):
        for zero_points in ((-128, 127), (127, -128)):
            cases[f"{'dwconv' if depthwise else 'conv'} {rounding} {zero_points}"] = _conv_case(rng, depthwise, rounding, zero_points)
    for zero_points in ((-128, 127), (127, -128), (3, -5)):
        cases[f"conv 1x1 double {zero_points}"] = _conv_case(rng, False, "double", zero_points, pointwise=True)
        cases[f"dense double {zero_points}"] = _conv_case(rng, False, "double", zero_points, dense=True)
    return {**cases, **_elementwise_cases(rng), **_window_cases(rng)}


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_each_tflite_int8_c_emitter_computes_its_kernels_integers(name, tmp_path):
    fields, params, inputs = CASES[name]
    ir = one_layer_ir(fields, params, inputs=len(inputs))
    (layer,) = ir.layers
    expected = layer_kernel(ir)(layer, ir.params.get(layer.name, {}), inputs)
    ours = c_output(ir, inputs, tmp_path)
    np.testing.assert_array_equal(ours.reshape(expected.shape), expected)


def layer_kernel(ir):
    return operation_of(ir.layers[0]).kernel


SIMD_CASES = [name for name in CASES if name.startswith(("conv", "dense")) and "double" in name]


@pytest.mark.parametrize("name", SIMD_CASES)
def test_the_simd_paths_of_a_tflite_int8_conv_are_its_kernels_integers(name, tmp_path):
    """qt_gemm.h's AVX2 and AVX-512 VNNI microkernels with the zero point folded into the offsets and TFLite's
    requantization in vectors, against the kernel: the same cases (the paths this CPU runs; every path compiled)."""
    fields, params, inputs = CASES[name]
    ir = one_layer_ir(fields, params)
    expected = layer_kernel(ir)(ir.layers[0], params, inputs)
    for path, output in run_on_simd_paths(ir, inputs[0], tmp_path).items():
        np.testing.assert_array_equal(output.reshape(expected.shape), expected, err_msg=f"path {path}")
    skip_unless_the_cpu_runs_a_simd_path()
