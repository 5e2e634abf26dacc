"""An operation is added in the places the README's "adding an operation" lists: in a copy of the project, a new
element-wise operation, sub (a Keras Subtract of two activations), is declared in its own folder core/ir/ops/sub/
(pattern, record, fields, the integer arithmetic of each dialect as a model of integer steps that the simulator and
the C render, the .tflite operator it is read from), with its C in
core/backends/c/ops/sub.py, its host-only reason in core/backends/accel/ops/sub.py, its .tflite writer in
core/backends/tflite/ops.py and its .tflite reader's converter in core/frontend/tflite_graph.py: five places, no other
file touched. It runs through all eight stages on tf2ir, tflite_int8 and accel_tflite, bit-exact: the simulator with
the annotated graph on tf2ir, with TFLite's reference kernels on tflite_int8, the generated C with the simulator on
all three; and the .tflite that tflite_int8 wrote is read back as a model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT, copy_of_the_project

OPERATION_FOLDER = {"core/ir/ops/sub/__init__.py": '''"""sub (a test's operation): the element-wise difference of two activations of one shape. Its record and fields
are add's (the same operands, grids and requantization); its arithmetic is its own: TF2IR's as its integer model
(the annotated graph, the simulator and the C render it), the tflite_int8 dialect's as TFLite's SUB computes it
(sub.cc: each input rescaled as add.cc's, then subtracted)."""

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.graph import Graph, Node
from core.frontend.layers import AnnotateRule, GraphIndex, IntegerModelBuilder, Layer, Pattern, QKind
from core.ir.activations import absorb_activation, activation_named
from core.ir.integer_kernel import integer_model_kernel, pair_lookup, pair_table
from core.ir.op import IrOp, register_op
from core.ir.ops.add.emit import add_fields
from core.ir.ops.add.pattern import is_activation_sum
from core.ir.ops.add.record import AddLayer
from core.ir.ops.add.tflite import add_from_tflite
from core.quantize.grid import AffineGrid, Pow2Grid


@dataclass(frozen=True, kw_only=True)
class SubLayer(AddLayer):
    operation: ClassVar[str] = "sub"
    schema: ClassVar = dataclasses.replace(AddLayer.schema, doc={
        "tf2ir": "Element-wise difference pl - add of two int8 tensors of one shape, aligned and shifted as add's.",
        "tflite_int8": "Element-wise difference on the tflite_int8 scheme (sub.cc): each input rescaled as add's, subtracted."})
    label_prefix: ClassVar[str] = "sub"


def match_sub(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    layer = Layer(name=node.name, op="sub", inputs=list(node.inputs), output=f"{node.name}:0", nodes=[node.name])
    absorb_activation(layer, index)
    return layer


def sub_model(model: IntegerModelBuilder):
    """The finer operand aligned to the coarser by a rounding shift, the difference shifted to the output, clamped."""
    scales, output = model.input_log2scales, model.output_log2scale
    coarse = min(scales)
    aligned = [model.round_shift(model.to_ints(tensor, scale), scale - coarse) for tensor, scale in zip(model.inputs, scales)]
    difference = model.round_shift(model.op("Sub", aligned), coarse - output)
    low, high = activation_named(model.activation).clamp(output)
    return model.from_ints(model.clamp(difference, low, high), output)


def tflite_sub_model(model: IntegerModelBuilder, record: SubLayer):
    """TFLite's SUB: each input less its zero point, shifted left and rescaled as add's; the difference rescaled to the
    output, plus its zero point, clamped."""
    first, second = (model.rescale(model.op("Mul", [model.op("Sub", [tensor, model.const("zero_point", grid.zero_point)]),
                                                    model.const("left_shift", 1 << record.left_shift)]), multiplier, shift)
                     for tensor, grid, multiplier, shift in zip(model.inputs, record.input_grids, record.input_multipliers, record.input_shifts))
    difference = model.rescale(model.op("Sub", [first, second]), record.output_multiplier, record.output_shift)
    return model.clamp(model.op("AddV2", [difference, model.const("zero_point", record.output_grid.zero_point)]), record.output_min,
                       record.output_max)


def _tflite_sub(record: SubLayer, params: dict, inputs: list) -> np.ndarray:
    return pair_lookup(pair_table(tflite_sub_model, record), *inputs)


KERNELS = {Pow2Grid: integer_model_kernel(sub_model), AffineGrid: _tflite_sub}


def sub_kernel(record: SubLayer, params: dict, inputs: list) -> np.ndarray:
    return KERNELS[type(record.output_grid)](record, params, inputs)


SUB = register_op(IrOp("sub", SubLayer,
                       AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION, integer_model=sub_model),
                       (Pattern("sub", ("Sub",), match_sub, applies=is_activation_sum),), add_fields, sub_kernel,
                       input_kinds=("pl", "add"), builders={"SUB": add_from_tflite}))
'''}

C_EMITTER = '''"""sub as C99: its dialect's model rendered per element, TF2IR's integer model or TFLite's affine model."""

import math

from core.backends.c.emitter import emits
from core.backends.c.integer_model import record_expression, element_expression
from core.ir.ops.sub import SubLayer, sub_model, tflite_sub_model
from core.quantize.grid import AffineGrid, Pow2Grid

EXPRESSIONS = {Pow2Grid: lambda record, inputs: element_expression(sub_model, record, inputs),
               AffineGrid: lambda record, inputs: record_expression(tflite_sub_model, record, inputs)}


@emits("sub")
def sub_emit_c(record: SubLayer, symbol: str) -> str:
    return f"""static void {symbol}(const int8_t *restrict in0, const int8_t *restrict in1, int8_t *restrict out)
{{
    long i;
    for (i = 0; i < {math.prod(record.shape_of_output())}L; i++) {{
        out[i] = {EXPRESSIONS[type(record.output_grid)](record, ["in0[i]", "in1[i]"])};
    }}
}}
"""
'''

HOST_ONLY = '''"""sub stays on the host."""

from core.backends.accel.lowering import host_only

host_only("sub", "the accelerator's ALU adds; it has no subtraction")
'''

WRITER = '''

def _sub(writer: TfliteWriter, layer: Layer) -> None:
    inputs = [writer.activation(tensor) for tensor in layer.inputs]
    writer.operator("SUB", inputs, [writer.activation(layer.output)], *writer.options("SubOptions", fusedActivationFunction=writer.fused(layer)))


WRITERS["sub"] = OperatorWriter(_sub, written("SUB"))
'''

CONVERTER = '''
CONVERTERS["SUB"] = _binary("subtract", "sub")
FLOAT_ONLY = FLOAT_ONLY - {"SUB"}  # an int8 file's SUB is read too: the IR computes it
'''

# each place the README lists, and what the test writes there: a new file, or lines appended to a file
PLACES = {**OPERATION_FOLDER, "core/backends/c/ops/sub.py": C_EMITTER, "core/backends/accel/ops/sub.py": HOST_ONLY}
APPENDED = {"core/backends/tflite/ops.py": WRITER, "core/frontend/tflite_graph.py": CONVERTER}


@pytest.fixture(scope="module")
def project_with_a_new_operation(tmp_path_factory) -> Path:
    copy = copy_of_the_project(tmp_path_factory.mktemp("project"))
    for name, text in PLACES.items():
        assert not (copy / name).exists(), name
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text(text)
    for name, text in APPENDED.items():
        with open(copy / name, "a") as file:
            file.write(text)
    return copy


def test_the_places_are_the_readme_s():
    """The README's count of places to add an operation is the places this test touches."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    section = readme[readme.index("Adding an IR operation"):readme.index("Adding a fused activation")]
    places = {"core/ir/ops/<op>/", "core/backends/c/ops/", "core/backends/accel/ops/", "core/backends/tflite/ops.py",
              "core/frontend/tflite_graph.py"}
    assert all(place in section for place in places), section
    touched = {name.split("/sub")[0] for name in [*PLACES, *APPENDED]}
    assert len(touched) == len(places) == 5 and "takes 5 places" in section, touched


def subtracting_model(path: Path) -> Path:
    import keras

    keras.utils.set_random_seed(0)
    images = keras.Input((8, 8, 1), name="digits")
    stem = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="stem")(images)
    left = keras.layers.Conv2D(8, 3, padding="same", name="left")(stem)
    right = keras.layers.Conv2D(8, 1, activation="relu", name="right")(stem)
    difference = keras.layers.Subtract(name="difference")([left, right])
    scores = keras.layers.Dense(10, name="classifier")(keras.layers.Flatten(name="flatten")(difference))
    keras.Model(images, scores).save(path)
    return path


def _run_py(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], cwd=project, capture_output=True, text=True, timeout=900)


def _run_to_codegen(project: Path, cache: Path, target: str, model: Path, fmt: str, out: str) -> dict:
    ran = _run_py(project, f"target={target}", f"model.name={model.stem}", f"model.format={fmt}", f"model.file.path={model}",
                  "calib.num_images=64", "data.eval_num_images=60", f"store.cache_dir={cache}", f"export_dir={out}")
    assert ran.returncode == 0, ran.stderr[-3000:]
    layers = json.loads((project / out / "emit_ir" / "net_def.json").read_text())
    assert [layer["operation"] for layer in layers].count("sub") == 1
    metrics = json.loads((project / out / "metrics.json").read_text())
    assert metrics["codegen.bitexact"] == 1.0 and metrics["simulate.layer_agreement_min"] == 1.0, metrics
    return metrics


@pytest.mark.parametrize("target", ["tf2ir", "tflite_int8", "accel_tflite"])
def test_the_new_operation_runs_all_stages_bit_exact(project_with_a_new_operation, model_cache, target):
    project = project_with_a_new_operation
    model = subtracting_model(project / "subtracting.keras")
    metrics = _run_to_codegen(project, model_cache, target, model, "keras", f"out_{target}")
    if target == "tf2ir":
        assert metrics["simulate.end_point_agreement"] == 1.0  # the annotated graph computes the IR's integers
    else:
        assert metrics["simulate.reference_agreement"] == 1.0  # TFLite's reference kernels, on the .tflite it wrote
    if target == "accel_tflite":
        plan = (project / f"out_{target}" / "partition" / "partition_plan.json").read_text()
        assert "no subtraction" in plan and metrics["partition.layers_accel"] > 0
    if target == "tflite_int8":  # the .tflite it wrote, SUB and all, read back as a model: its own IR again
        written = project / "written.tflite"
        shutil.copy(project / f"out_{target}" / "emit_ir" / "model.tflite", written)
        again = _run_to_codegen(project, model_cache, target, written, "tflite", "out_read_back")
        assert again["simulate.reference_agreement"] == 1.0
