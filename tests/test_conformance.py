"""The conformance matrix, generated from the operator catalogue: every .tflite operator an IR operation reads
(core/ir/ops: its builders) at every activation width its arithmetic has (8: `tflite_int8`, 16: `tflite_int16x8`) is
one cell. A cell is a one-operator .tflite file at seeded random quantization (tests/tflite_builder.py), whose output
is computed by the IR's kernels under each runtime and by that runtime's interpreter (LiteRT's reference kernels,
TensorFlow Lite for Microcontrollers), every byte compared; where the file is one IR layer, by the generated C; and at
8 bits by `accel_tflite`'s program (host C driving the ISA simulator), its layers on the accelerator where the
operation has a lowering (core/backends/accel/ops), else on the host with the reason.

A cell the catalogue claims and no case here builds fails, naming it: an operation added to the catalogue brings its
case. The deeper tests of an operator's arithmetic at its extremes stay beside it (test_runtimes.py, test_int16x8.py);
these cells are the matrix's breadth."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from conftest import PROJECT_ROOT
from harness import c_output
from tflite_builder import Tensor, model_bytes, one_operator_model
from core.backends.accel.ops import LOWERINGS
from core.backends.accel.partition import ACCEL, partition
from core.backends.accel.target import load_target
from core.backends.c.build import compile_program, run_program
from core.backends.program import generate_c, generate_program
from core.frontend.tflite import TfliteError, read_tflite
from core.ir.ops import OPS
from core.ir.tflite_interpreter import run_int8
from core.ir.simulator import IntegerSimulator
from core.ir.tflite_ir import ir_of_tflite
from core.quantize.runtimes import RUNTIMES, runtimes_of
from core.quantize.tflite_math import SIGNED_UNIT_RANGE_OUTPUT, UNIT_RANGE_OUTPUT
from core.quantize.tflite_reference import runner_of

# the runtimes each width's scheme runs on: tflite_int16x8's are the interpreters that have its kernels
WIDTH_RUNTIMES = {8: runtimes_of("tflite_int8"), 16: ("litert_reference", "tflm")}
INTEGERS = {8: np.int8, 16: np.int16}
BIASES = {8: np.int32, 16: np.int64}
_, ACCEL_TFLITE = load_target(PROJECT_ROOT / "conf" / "target" / "accel_tflite.yaml")


# operators the reader folds into those the catalogue reads (core/frontend/tflite.py), at the widths of what they become
FOLDED = {"PADV2": (8, 16), "CONV_2D (grouped)": (8, 16)}


def catalogue_cells() -> list[tuple[str, int]]:
    return sorted({(builder, bits) for op in OPS.values() for builder in op.builders for bits in op.widths_of(builder)} |
                  {(operator, bits) for operator, widths in FOLDED.items() for bits in widths})


class Cell:
    """What a case builds a file of: the rng, the width, and activation tensors at a random quantization of it."""

    def __init__(self, seed: int, bits: int):
        self.rng, self.bits = np.random.default_rng(seed), bits

    def activation(self, shape: tuple[int, ...], scale: float | None = None, zero_point: int | None = None) -> Tensor:
        """int8 at a random scale and zero point; int16 symmetric (zero point 0), as TFLite's 16x8 mode has them."""
        if scale is None:
            scale = float(np.float32(self.rng.uniform(0.01, 0.2) / (256 if self.bits == 16 else 1)))
        if zero_point is None:
            zero_point = int(self.rng.integers(-100, 100)) if self.bits == 8 else 0
        return Tensor(shape, INTEGERS[self.bits], scale, zero_point)

    def fixed_output(self, shape: tuple[int, ...], fixed: dict[int, tuple[float, int]]) -> Tensor:
        scale, zero_point = fixed[self.bits]
        return Tensor(shape, INTEGERS[self.bits], scale, zero_point)

    def constant(self, values, dtype=np.int32) -> Tensor:
        values = np.asarray(values, dtype)
        return Tensor(values.shape, dtype, data=values)

    def weights(self, shape: tuple[int, ...], axis: int, channels: int, input_scale: float, output_scale: float,
                reduction: int) -> tuple[Tensor, Tensor]:
        """Per-channel int8 weights and a bias at input scale x weight scale, the multiplier around 2^-8 .. 2^0."""
        weight = self.rng.integers(-127, 128, shape).astype(np.int8)
        weight_scales = output_scale / input_scale / reduction * self.rng.uniform(0.5, 4.0, channels)
        bias = self.rng.integers(-1000, 1000, channels).astype(BIASES[self.bits])
        return (Tensor(shape, np.int8, [float(s) for s in weight_scales], 0, axis, weight),
                Tensor((channels,), BIASES[self.bits], [float(s) for s in input_scale * weight_scales], 0, 0, bias))

    def batch(self, shape: tuple[int, ...], count: int = 8) -> np.ndarray:
        """`count` inputs of `shape`: both extremes of the width first, then uniform over it."""
        info = np.iinfo(INTEGERS[self.bits])
        batch = self.rng.integers(info.min, info.max + 1, (count, *shape)).astype(INTEGERS[self.bits])
        batch[0], batch[1] = info.min, info.max
        return batch


Case = Callable[[Cell], tuple[bytes, np.ndarray]]  # the file, and the inputs of its one computed input


def _unary(operator: str, options=None, fixed=None) -> Case:
    def case(cell: Cell):
        source = cell.activation((1, 256))
        output = cell.fixed_output((1, 256), fixed) if fixed else cell.activation((1, 256))
        return one_operator_model(operator, [source], output, options), cell.batch((256,))
    return case


def _every_int8(cell: Cell) -> np.ndarray:
    """Every int8 value once: an element-wise table's every entry."""
    return np.arange(-128, 128, dtype=np.int8).reshape(1, 256)


def _every_value(cell: Cell) -> np.ndarray:
    """Every value of the cell's width once (int16: 65536): an element-wise function's every input."""
    limits = np.iinfo(INTEGERS[cell.bits])
    return np.arange(limits.min, limits.max + 1).astype(INTEGERS[cell.bits]).reshape(1, -1)


def _elementwise(operator: str, options=None, fixed=None) -> Case:
    def case(cell: Cell):
        shape = (1, 1 << cell.bits)
        output = cell.fixed_output(shape, fixed) if fixed else cell.activation(shape)
        return one_operator_model(operator, [cell.activation(shape)], output, options), _every_value(cell)
    return case


def _relu6(cell: Cell):
    """At its input's quantization, as TensorFlow's converter writes it (TFLM's RELU6 requantizes nothing)."""
    source = cell.activation((1, 256))
    return one_operator_model("RELU6", [source], source), _every_int8(cell)


def _rsqrt(cell: Cell):
    """Every value at or above the zero point (the reals from 0: the reciprocal root is defined), real 0 included."""
    count = 256 if cell.bits == 8 else 32768
    source = cell.activation((1, count), zero_point=-128 if cell.bits == 8 else 0)
    output = cell.activation((1, count), scale=float(np.float32(cell.rng.uniform(0.05, 0.5) / (256 if cell.bits == 16 else 1))))
    data = one_operator_model("RSQRT", [source], output)
    values = np.arange(-127, 129).clip(-128, 127) if cell.bits == 8 else np.arange(count)
    return data, values.astype(INTEGERS[cell.bits]).reshape(1, count)


def _with_constant(operator: str) -> Case:
    def case(cell: Cell):
        shape, integers = (1, 1 << cell.bits), INTEGERS[cell.bits]
        source = cell.activation(shape)
        bound = cell.constant([int(cell.rng.integers(-64, 64)) << (cell.bits - 8)], integers)
        bound.scale, bound.zero_point = source.scale, source.zero_point
        return one_operator_model(operator, [source, bound], Tensor(shape, integers, source.scale, source.zero_point)), _every_value(cell)
    return case


def _quantize(cell: Cell):
    return one_operator_model("QUANTIZE", [cell.activation((1, 256))], cell.activation((1, 256))), _every_int8(cell)


def _binary(operator: str) -> Case:
    """The model's input and, at 8 bits, the same values requantized to another grid (a QUANTIZE): two operands."""
    def case(cell: Cell):
        shape = (1, 3, 4, 5)
        # the general-scale 16x8 ADD, as TensorFlow's converter writes it (not the power-of-two one)
        options = (f"{operator.title()}Options", {"fusedActivationFunction": 0, **({"potScaleInt16": False} if operator == "ADD" else {})})
        first, output = cell.activation(shape), cell.activation(shape)
        if cell.bits == 16:
            return model_bytes([first, output], [(operator, [0, 0], 1, options)], [0], [1]), cell.batch(shape[1:])
        second = cell.activation(shape)
        return (model_bytes([first, second, output], [("QUANTIZE", [0], 1, None), (operator, [0, 1], 2, options)], [0], [2]),
                cell.batch(shape[1:]))
    return case


def _conv(operator: str) -> Case:
    def case(cell: Cell):
        source = cell.activation((1, 6, 5, 3))
        output = cell.activation((1, 6, 5, 4) if operator == "CONV_2D" else (1, 6, 5, 3))
        if operator == "CONV_2D":
            weight, bias = cell.weights((4, 3, 3, 3), 0, 4, source.scale, output.scale, 27)
            options = ("Conv2DOptions", {"padding": 0, "strideW": 1, "strideH": 1, "fusedActivationFunction": 1})
        else:
            weight, bias = cell.weights((1, 3, 3, 3), 3, 3, source.scale, output.scale, 9)
            options = ("DepthwiseConv2DOptions", {"padding": 0, "strideW": 1, "strideH": 1, "depthMultiplier": 1,
                                                   "fusedActivationFunction": 0})
        return one_operator_model(operator, [source, weight, bias], output, options), cell.batch((6, 5, 3))
    return case


def _grouped_conv(cell: Cell):
    """A CONV_2D of as many groups as input channels (a filter of one input channel), as TFLite's converter writes
    keras-hub's depthwise layers: read as the DEPTHWISE_CONV_2D it is (core/frontend/tflite.py)."""
    source, output = cell.activation((1, 6, 5, 4)), cell.activation((1, 6, 5, 4))
    weight, bias = cell.weights((4, 3, 3, 1), 0, 4, source.scale, output.scale, 9)
    options = ("Conv2DOptions", {"padding": 0, "strideW": 1, "strideH": 1, "fusedActivationFunction": 0})
    return one_operator_model("CONV_2D", [source, weight, bias], output, options), cell.batch((6, 5, 4))


def _fully_connected(cell: Cell):
    source, output = cell.activation((1, 12)), cell.activation((1, 7))
    weight, bias = cell.weights((7, 12), 0, 7, source.scale, output.scale, 12)
    options = ("FullyConnectedOptions", {"fusedActivationFunction": 0})
    return one_operator_model("FULLY_CONNECTED", [source, weight, bias], output, options), cell.batch((12,))


def _pool(operator: str) -> Case:
    def case(cell: Cell):
        source = cell.activation((1, 6, 6, 3))
        output = source if operator == "MAX_POOL_2D" else cell.activation((1, 3, 3, 3), scale=source.scale, zero_point=source.zero_point)
        options = ("Pool2DOptions", {"padding": 1, "strideW": 2, "strideH": 2, "filterWidth": 2, "filterHeight": 2,
                                     "fusedActivationFunction": 0})
        output = Tensor((1, 3, 3, 3), output.dtype, output.scale, output.zero_point)
        return one_operator_model(operator, [source], output, options), cell.batch((6, 6, 3))
    return case


def _reduce(operator: str) -> Case:
    def case(cell: Cell):
        source = cell.activation((1, 3, 3, 3))  # a window the accelerator's max pool takes
        output = (Tensor((1, 1, 1, 3), source.dtype, source.scale, source.zero_point) if operator == "REDUCE_MAX"
                  else cell.activation((1, 1, 1, 3)))
        return (one_operator_model(operator, [source, cell.constant([1, 2])], output, ("ReducerOptions", {"keepDims": True})),
                cell.batch((3, 3, 3)))
    return case


def _sum(cell: Cell):
    """Over a 1x1 map, as litert-torch writes a global average pool of one, at its input's quantization (a SUM that
    requantizes: tests/test_runtimes.py)."""
    source = cell.activation((1, 1, 1, 16))
    output = Tensor((1, 1, 1, 16), source.dtype, source.scale, source.zero_point)
    return one_operator_model("SUM", [source, cell.constant([1, 2])], output, ("ReducerOptions", {"keepDims": True})), cell.batch((1, 1, 16))


def _pad(cell: Cell):
    source = cell.activation((1, 3, 4, 2))
    output = Tensor((1, 5, 6, 2), source.dtype, source.scale, source.zero_point)
    return one_operator_model("PAD", [source, cell.constant([[0, 0], [1, 1], [1, 1], [0, 0]])], output), cell.batch((3, 4, 2))


def _padv2(cell: Cell):
    """litert-torch's and onnx2tf's PADV2: by the type's lowest value before a VALID MAX_POOL_2D (a max pool's padding
    of -inf), or by the zero point (a PAD); the reader folds both into the operators it reads (core/frontend/tflite.py)."""
    source = cell.activation((1, 5, 6, 3))
    padded = Tensor((1, 7, 8, 3), source.dtype, source.scale, source.zero_point)
    paddings = cell.constant([[0, 0], [1, 1], [1, 1], [0, 0]])
    if cell.rng.integers(2):
        fill = cell.constant(source.zero_point, INTEGERS[cell.bits])
        fill.scale, fill.zero_point = source.scale, source.zero_point
        return one_operator_model("PADV2", [source, paddings, fill], padded), cell.batch((5, 6, 3))
    lowest = cell.constant(np.iinfo(INTEGERS[cell.bits]).min, INTEGERS[cell.bits])
    lowest.scale, lowest.zero_point = source.scale, source.zero_point
    output = Tensor((1, 3, 3, 3), source.dtype, source.scale, source.zero_point)
    options = ("Pool2DOptions", {"padding": 1, "strideW": 2, "strideH": 2, "filterWidth": 3, "filterHeight": 3, "fusedActivationFunction": 0})
    data = model_bytes([source, paddings, lowest, padded, output], [("PADV2", [0, 1, 2], 3, None), ("MAX_POOL_2D", [3], 4, options)], [0], [4])
    return data, cell.batch((5, 6, 3))


def _reshape(cell: Cell):
    """A flatten of a 1x1 image, as before a classifier: the reshape that moves no byte of a blocked layout."""
    source = cell.activation((1, 1, 1, 24))
    output = Tensor((1, 24), source.dtype, source.scale, source.zero_point)
    return (one_operator_model("RESHAPE", [source, cell.constant([-1, 24])], output, ("ReshapeOptions", {"newShape": [-1, 24]})),
            cell.batch((1, 1, 24)))


def _softmax(cell: Cell):
    options = ("SoftmaxOptions", {"beta": 1.0})
    return one_operator_model("SOFTMAX", [cell.activation((1, 10))], cell.fixed_output((1, 10), UNIT_RANGE_OUTPUT), options), cell.batch((10,))


def _concatenation(cell: Cell):
    source = cell.activation((1, 3, 4, 2))
    output = Tensor((1, 3, 4, 4), source.dtype, source.scale, source.zero_point)
    return (model_bytes([source, output], [("CONCATENATION", [0, 0], 1, ("ConcatenationOptions", {"axis": 3}))], [0], [1]),
            cell.batch((3, 4, 2)))


def _strided_slice(cell: Cell):
    source = cell.activation((1, 6, 5, 3))
    output = Tensor((1, 3, 4, 3), source.dtype, source.scale, source.zero_point)
    inputs = [source, cell.constant([0, 1, 1, 0]), cell.constant([1, 4, 5, 3]), cell.constant([1, 1, 1, 1])]
    options = ("StridedSliceOptions", {"beginMask": 1, "endMask": 1})  # the whole batch
    return one_operator_model("STRIDED_SLICE", inputs, output, options), cell.batch((6, 5, 3))


def _slice(cell: Cell):
    source = cell.activation((1, 6, 5, 3))
    output = Tensor((1, 3, 4, 3), source.dtype, source.scale, source.zero_point)
    return one_operator_model("SLICE", [source, cell.constant([0, 2, 1, 0]), cell.constant([-1, 3, 4, -1])], output), cell.batch((6, 5, 3))


def _expand_dims(cell: Cell):
    """A Conv1D's signal [N, L, C] made the image [N, 1, L, C] (the converter's EXPAND_DIMS before its CONV_2D); on the
    accelerator a host copy (ACCELERATOR_HOST_CASES)."""
    source = cell.activation((1, 6, 4))
    output = Tensor((1, 1, 6, 4), source.dtype, source.scale, source.zero_point)
    return one_operator_model("EXPAND_DIMS", [source, cell.constant(1)], output), cell.batch((6, 4))


def _squeeze(cell: Cell):
    """A global pool's 1 x 1 x C map squeezed to its C values, as before a classifier: no byte of a blocked layout moves."""
    source = cell.activation((1, 1, 1, 24))
    output = Tensor((1, 24), source.dtype, source.scale, source.zero_point)
    return one_operator_model("SQUEEZE", [source], output, ("SqueezeOptions", {"squeezeDims": [1, 2]})), cell.batch((1, 1, 24))


def _transpose(cell: Cell):
    source = cell.activation((1, 3, 4, 2))
    output = Tensor((1, 4, 3, 2), source.dtype, source.scale, source.zero_point)
    return one_operator_model("TRANSPOSE", [source, cell.constant([0, 2, 1, 3])], output), cell.batch((3, 4, 2))


def _gather(cell: Cell):
    table = cell.activation((10, 6))
    integers = np.iinfo(INTEGERS[cell.bits])
    table.data = cell.rng.integers(integers.min, integers.max + 1, (10, 6)).astype(INTEGERS[cell.bits])
    ids = Tensor((1, 5), np.int32)
    output = Tensor((1, 5, 6), INTEGERS[cell.bits], table.scale, table.zero_point)
    data = one_operator_model("GATHER", [table, ids], output, ("GatherOptions", {"axis": 0}))
    return data, cell.rng.integers(0, 10, (8, 5)).astype(np.int32)


def _batch_matmul(cell: Cell):
    """x times its own transpose (adjY): a product of two activations, as attention's scores are."""
    source, output = cell.activation((1, 4, 6)), cell.activation((1, 4, 4), scale=float(np.float32(cell.rng.uniform(1.0, 4.0))))
    data = model_bytes([source, output], [("BATCH_MATMUL", [0, 0], 1, ("BatchMatMulOptions", {"adjX": False, "adjY": True}))], [0], [1])
    return data, cell.batch((4, 6))


def _resize(operator: str) -> Case:
    def case(cell: Cell):
        source = cell.activation((1, 3, 4, 2))
        output = Tensor((1, 6, 8, 2), source.dtype, source.scale, source.zero_point)
        kind = "ResizeBilinearOptions" if operator == "RESIZE_BILINEAR" else "ResizeNearestNeighborOptions"
        options = (kind, {"alignCorners": False, "halfPixelCenters": True})
        return one_operator_model(operator, [source, cell.constant([6, 8])], output, options), cell.batch((3, 4, 2))
    return case


CASES: dict[str, Case] = {
    "ADD": _binary("ADD"), "MUL": _binary("MUL"),
    "CONV_2D": _conv("CONV_2D"), "DEPTHWISE_CONV_2D": _conv("DEPTHWISE_CONV_2D"), "FULLY_CONNECTED": _fully_connected,
    "CONV_2D (grouped)": _grouped_conv,
    "AVERAGE_POOL_2D": _pool("AVERAGE_POOL_2D"), "MAX_POOL_2D": _pool("MAX_POOL_2D"),
    "MEAN": _reduce("MEAN"), "REDUCE_MAX": _reduce("REDUCE_MAX"), "SUM": _sum,
    "PAD": _pad, "PADV2": _padv2, "RESHAPE": _reshape, "EXPAND_DIMS": _expand_dims, "SQUEEZE": _squeeze, "SOFTMAX": _softmax, "CONCATENATION": _concatenation, "STRIDED_SLICE": _strided_slice, "SLICE": _slice,
    "TRANSPOSE": _transpose, "GATHER": _gather, "BATCH_MATMUL": _batch_matmul,
    "RESIZE_BILINEAR": _resize("RESIZE_BILINEAR"), "RESIZE_NEAREST_NEIGHBOR": _resize("RESIZE_NEAREST_NEIGHBOR"),
    "LOGISTIC": _elementwise("LOGISTIC", fixed=UNIT_RANGE_OUTPUT), "TANH": _elementwise("TANH", fixed=SIGNED_UNIT_RANGE_OUTPUT),
    "RELU": _elementwise("RELU"), "RELU6": _relu6, "RELU_0_TO_1": _elementwise("RELU_0_TO_1"),
    "RELU_N1_TO_1": _elementwise("RELU_N1_TO_1"), "HARD_SWISH": _elementwise("HARD_SWISH"),
    "LEAKY_RELU": _elementwise("LEAKY_RELU", ("LeakyReluOptions", {"alpha": 0.2})),
    "GELU": _elementwise("GELU", ("GeluOptions", {"approximate": False})), "EXP": _elementwise("EXP"),
    "RSQRT": _rsqrt, "QUANTIZE": _quantize, "MAXIMUM": _with_constant("MAXIMUM"), "MINIMUM": _with_constant("MINIMUM"),
}


@pytest.mark.parametrize("operator, bits", catalogue_cells(), ids=lambda value: str(value))
def test_every_operator_the_catalogue_reads_at_every_width_is_each_runtimes_bytes(tmp_path, operator, bits):
    assert operator in CASES, (f"{operator} at int{bits}: the catalogue reads it and this matrix has no case for it; add one to "
                               "CASES (tests/test_conformance.py)")
    for seed in range(3):
        data, inputs = CASES[operator](Cell(seed, bits))
        path = tmp_path / f"{operator}_{seed}.tflite"
        path.write_bytes(data)
        model = read_tflite(path)
        output = model.outputs[0]
        for name in WIDTH_RUNTIMES[bits]:
            if RUNTIMES[name].lacks(operator, bits):  # declared: its interpreter fails the file or computes it wrong; the reader refuses it
                if operator in RUNTIMES[name].defective_int16_operators:
                    theirs = runner_of(name, path).tensors(inputs)[output].reshape(inputs.shape[0], -1)
                    assert not np.array_equal(run_int8(model, inputs, RUNTIMES["tflm"])[output].reshape(theirs.shape), theirs), \
                        f"{name}'s {operator} is declared defective at int{bits} and computes what TFLM does: drop the declaration"
                else:
                    with pytest.raises(RuntimeError):
                        runner_of(name, path).tensors(inputs)
                with pytest.raises(TfliteError, match="has no kernel for it"):
                    ir_of_tflite(model, runtime=RUNTIMES[name])
                continue
            ours = run_int8(model, inputs, RUNTIMES[name])[output]
            theirs = runner_of(name, path).tensors(inputs)[output].reshape(ours.shape)
            differing = np.flatnonzero(ours.ravel() != theirs.ravel())
            assert ours.dtype == INTEGERS[bits] and differing.size == 0, f"seed {seed}, {name}: {differing.size} of {ours.size} differ"
            ir = ir_of_tflite(model, runtime=RUNTIMES[name])
            if len(ir.layers) == 1 and inputs.dtype != np.int32:
                images = inputs.reshape(len(inputs), *generate_c(ir).input_shape)
                computed = c_output(ir, [images], tmp_path / f"{operator}_{seed}_{name}").reshape(ours.shape)
                assert np.array_equal(computed, ours), f"seed {seed}, {name}: the generated C differs from the kernels"


# cases whose layer has a lowering but is a host copy on the accelerator, with the reason the partition gives
ACCELERATOR_HOST_CASES = {"EXPAND_DIMS": "moves values across the blocked layout"}


@pytest.mark.parametrize("operator", sorted({operator for operator, bits in catalogue_cells() if bits == 8}))
def test_every_operator_the_catalogue_reads_runs_on_the_accelerator_as_on_the_host(tmp_path, operator):
    """accel_tflite's program (host C driving the ISA simulator) gives the kernels' every byte, each layer of an
    operation with a lowering on the accelerator (but the cases declared a host copy, with their reason)."""
    data, inputs = CASES[operator](Cell(0, 8))
    path = tmp_path / f"{operator}.tflite"
    path.write_bytes(data)
    ir = ir_of_tflite(read_tflite(path))
    plan = partition(ir, ACCEL_TFLITE)
    placed = {group.layer: (group.target, group.reason) for group in plan.groups}
    host_reason = ACCELERATOR_HOST_CASES.get(operator)
    for layer in ir.layers:
        lowered = layer.operation in LOWERINGS and host_reason is None
        assert (placed[layer.name][0] == ACCEL) == lowered, f"{layer.name} ({layer.operation}): {placed[layer.name]}"
        assert host_reason is None or host_reason in placed[layer.name][1]
    program = generate_program(ir, plan)
    binary = compile_program(program.write(tmp_path / "program"), tmp_path / "network", defines=("QT_PORTABLE",))
    images = inputs.reshape(len(inputs), *program.input_shape)
    expected = IntegerSimulator(ir).run_int8(images)
    outputs = run_program(binary, program, images, tmp_path / "run").outputs
    for name in program.end_points:
        assert np.array_equal(outputs[name].reshape(expected[name].shape), expected[name]), name


def test_the_matrix_has_no_case_the_catalogue_does_not_claim():
    """A case left behind when an operator leaves the catalogue (or a misspelt one) would test nothing."""
    claimed = {operator for operator, _ in catalogue_cells()}
    assert set(CASES) <= claimed, sorted(set(CASES) - claimed)
