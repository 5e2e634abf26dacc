"""An operation's integer arithmetic is defined once, as its integer model, and rendered twice: as graph ops in the
annotated graph and on integer arrays as the simulator's kernel (core/ir/integer_kernel.py). Here the array rendering
of each model against the seed's arithmetic written independently, in exact rationals, over every int8 operand."""

from __future__ import annotations

import math
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from types import SimpleNamespace

from core.backends.accel.integer_model import alu_plan
from core.backends.accel.lowering import LoweringError
from core.backends.c.emitter import CodegenError
from core.backends.c.integer_model import CModelBuilder, model_expression
from core.ir.activations import activation_named
from core.ir.fixedpoint import saturate
from core.ir.integer_kernel import ArrayModelBuilder
from core.ir.ops.add.kernel import add_model
from core.ir.ops.mul.kernel import mul_model

INT8 = np.arange(-128, 128, dtype=np.int64)
RUNTIME = Path(__file__).resolve().parents[1] / "core" / "backends" / "c" / "runtime"


def half_up(value: Fraction) -> int:
    return math.floor(value + Fraction(1, 2))


def shifted(value: int, shift: int) -> int:
    """value * 2^-shift, rounded half up: the seed's rounding shift, as a rational."""
    return half_up(Fraction(value) / Fraction(2) ** shift)


@pytest.mark.parametrize("pl_scale, add_scale, output_scale, activation", [
    (5, 5, 5, "None"), (7, 4, 4, "Relu"), (3, 6, 2, "None"), (4, 6, 7, "Relu6"), (6, 2, 6, "None")])
def test_add_as_the_simulator_runs_it_is_the_seeds_two_roundings_over_every_int8_pair(pl_scale, add_scale, output_scale, activation):
    pl, add = np.meshgrid(INT8, INT8, indexing="ij")
    builder = ArrayModelBuilder([pl, add], [pl_scale, add_scale], output_scale, activation)
    got = saturate(add_model(builder))
    coarse = min(pl_scale, add_scale)
    low, high = activation_named(activation).clamp(output_scale)
    for a, b in [(int(a), int(b)) for a in INT8[::7] for b in INT8[::5]]:
        total = shifted(a, pl_scale - coarse) + shifted(b, add_scale - coarse)
        expected = min(max(shifted(total, coarse - output_scale), low), high)
        assert got[a + 128, b + 128] == max(-128, min(127, expected)), (a, b)


@pytest.mark.parametrize("scales, output_scale, activation", [((7, 7), 7, "None"), ((6, 7), 5, "Relu"), ((2, 3), 9, "None")])
def test_mul_as_the_simulator_runs_it_is_one_rounding_of_the_exact_product_with_broadcasting(scales, output_scale, activation):
    rng = np.random.default_rng(3)
    gate = rng.integers(-128, 128, (2, 1, 1, 5))
    feature = rng.integers(-128, 128, (2, 3, 4, 5))
    got = saturate(mul_model(ArrayModelBuilder([feature, gate], list(scales), output_scale, activation)))
    assert got.shape == feature.shape
    low, high = activation_named(activation).clamp(output_scale)
    for index in np.ndindex(*feature.shape):
        product = int(feature[index]) * int(gate[index[0], 0, 0, index[3]])
        expected = min(max(shifted(product, sum(scales) - output_scale), low), high)
        assert got[index] == max(-128, min(127, expected)), index


def test_a_graph_op_without_an_array_form_is_refused_naming_it():
    builder = ArrayModelBuilder([INT8], [7], 7, "None")
    with pytest.raises(NotImplementedError, match="graph op Tanh has no array form"):
        builder.op("Tanh", [INT8])


@pytest.mark.parametrize("model, scales, output_scale, activation", [
    (add_model, (7, 4), 4, "Relu"), (add_model, (3, 6), 2, "Relu6"), (add_model, (4, 6), 7, "None"),
    (mul_model, (6, 7), 5, "Relu"), (mul_model, (2, 3), 9, "None")])
def test_the_c_rendering_of_a_model_is_its_array_rendering_over_every_int8_pair(tmp_path, model, scales, output_scale, activation):
    """The C the program runs for add and mul (their emitters render the model per element) against the simulator's
    kernel, compiled by the system C compiler with the program's runtime header, on all 65,536 operand pairs."""
    expression = model_expression(model, ["a", "b"], list(scales), output_scale, activation)
    source = tmp_path / "pairs.c"
    source.write_text(f"""#include <stdio.h>
#include "qt_runtime.h"
int main(void)
{{
    int x, y;
    for (x = -128; x < 128; x++)
        for (y = -128; y < 128; y++) {{
            const int8_t a = (int8_t)x, b = (int8_t)y;
            printf("%d\\n", (int){expression});
        }}
    return 0;
}}
""")
    binary = tmp_path / "pairs"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-O1", f"-I{RUNTIME}", str(source), "-o", str(binary)], check=True)
    in_c = np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(), np.int64)
    first, second = np.meshgrid(INT8, INT8, indexing="ij")
    on_arrays = saturate(model(ArrayModelBuilder([first, second], list(scales), output_scale, activation)))
    np.testing.assert_array_equal(in_c, on_arrays.reshape(-1).astype(np.int64))


def test_a_graph_op_without_a_c_form_is_refused_naming_it():
    with pytest.raises(CodegenError, match="graph op FloorDiv has no C form"):
        CModelBuilder(["a"], [7], 7, "None").op("FloorDiv", ["a", "b"])


def test_an_element_wise_model_the_alu_cannot_compute_is_refused_naming_the_step():
    """The accelerator renders an element-wise model as ALU steps; a step it lacks (a product of two tensors) is a
    refusal partition reads, not a wrong program."""
    layer = SimpleNamespace(name="product")
    with pytest.raises(LoweringError, match="layer product: Mul: the ALU multiplies by a power of two .LSL. or -1 only"):
        alu_plan(lambda model, record: model.op("Mul", model.inputs), layer, 2)
    steps, result = alu_plan(lambda model, record: model.op("Mul", [model.inputs[0], model.const("four", 4)]), layer, 1)
    assert [(step.op, step.imm) for step in steps] == [("LSL", 2)] and result == 0


def test_an_element_wise_model_reading_a_value_its_box_no_longer_holds_is_refused():
    """Each ALU step overwrites its first operand's accumulators: a model that reads an input after shifting it in place
    would read the shifted values; the plan refuses it."""
    def reads_twice(model, record):
        shifted = model.round_shift(model.inputs[0], 1)
        return model.op("AddV2", [shifted, model.inputs[0]])

    with pytest.raises(LoweringError, match="reads a value its box no longer holds"):
        alu_plan(reads_twice, SimpleNamespace(name="twice"), 1)
