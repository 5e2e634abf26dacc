"""An operation is added as the README's "adding an operation" says: in a copy of the project, a new element-wise
operation, sub (a Keras Subtract of two activations), is declared in its own folder core/ir/ops/sub/ (pattern, fields,
the .tflite operator it is read from, and its arithmetic, one definition of both dialects that the annotated graph, the
simulator, the C and the accelerator render: `elementwise=`), with its .tflite writer in core/backends/tflite/ops.py, its
float reader's converter in core/frontend/tflite_graph.py and the accelerator pattern that names it; the files touched
outside its folder are counted from the copy's diff. It runs through all eight stages on tf2ir, tflite_int8,
tflite_int16x8 and accel_tflite (there on the accelerator), bit-exact: the simulator with the annotated graph on tf2ir,
with TFLite's reference kernels on the TFLite schemes, the generated C with the simulator on all four; and the .tflite
that tflite_int8 wrote is read back as a model (under --slow). Nothing of add's is reused: the steps it shares with it are
core/ir/common_scale.py's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT, copy_of_the_project

OPERATION_FOLDER = {"core/ir/ops/sub/__init__.py": '''"""sub (a test's operation): the element-wise difference of two activations of one shape, with its own record (both
dialects: TF2IR's operands by producer and the activation; the tflite_int8 dialect's sub.cc requantization), fields,
.tflite builder and arithmetic (sub_arithmetic, one definition of both dialects): each input rescaled to the common
scale as core/ir/common_scale.py's operations rescale theirs, the second subtracted from the first, the difference
rescaled to the output, plus its zero point, clamped. The annotated graph, the simulator, the C and the accelerator
render it."""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.graph import Graph, Node
from core.frontend.layers import AnnotateRule, GraphIndex, IntegerModelBuilder, Layer, Pattern, QKind
from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.ir.activations import Activated, absorb_activation, activation_named
from core.ir.common_scale import (LEFT_SHIFTS, CommonScaleRequantization, common_scale_multipliers, multiplier_requantization,
                                  rescaled_operands, shift_requantization)
from core.ir.fields import shape_array
from core.ir.integer_kernel import ArrayModelBuilder, on_log2scales, pair_lookup, pair_table
from core.ir.op import IrContext, IrOp, register_op
from core.ir.records import OUTPUT_GRID, GridsKeys, IrError, IrLayer, OpSchema, OperandGrids, Shift, grid_field, written_in
from core.ir.rescale import onto_output
from core.ir.tflite_dialect import activation_bits, clamp_fields, scale_and_zero_point
from core.quantize.grid import AffineGrid, Pow2Grid
from core.quantize.runtimes import Runtime

_PAIR = {"type": "array", "minItems": 2, "maxItems": 2}


@dataclass(frozen=True, kw_only=True)
class SubLayer(OperandGrids, Activated, IrLayer):
    operation: ClassVar[str] = "sub"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ("Element-wise difference input0 - input1 of two int8 tensors of one shape: the finer operand shifted right "
                       "to the coarser's scale (half up), the difference shifted to the output scale, the activation's clamp."),
             "tflite_int8": ("Element-wise difference on the tflite_int8 scheme (sub.cc): each input less its zero point, shifted "
                             "left by left_shift, rescaled by its multiplier and shift; the difference rescaled by output_multiplier "
                             "and output_shift, plus output_zero_point, clamped. The operands are previous_layer in order.")},
        since={"tf2ir": "1.2", "tflite_int8": "1.2"},
        fields={"shape": shape_array("One image's shape of both inputs and the output."),
                "input0_name": {"type": "string", "minLength": 1}, "input1_name": {"type": "string", "minLength": 1},
                "input_scales": {**_PAIR, "items": {"type": "number", "exclusiveMinimum": 0}},
                "input_zero_points": {**_PAIR, "items": {"type": "integer"}},
                "input_multipliers": {**_PAIR, "items": {"type": "integer"}},
                "input_shifts": {**_PAIR, "items": {"type": "integer"}},
                "left_shift": {"enum": sorted(set(LEFT_SHIFTS.values()))},
                "output_multiplier": {"type": "integer"},
                "output_shift": {"type": "integer", "description": "TFLite's convention: positive shifts left."}})
    label_prefix: ClassVar[str] = "sub"

    input_grids: tuple[Pow2Grid | AffineGrid, ...] = grid_field(GridsKeys(("input0_log2scale", "input1_log2scale")))
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)
    shape: tuple[int, ...] = ()
    input0_name: str | None = written_in("tf2ir", None)  # TF2IR's: the operands by producer, the fused activation
    input1_name: str | None = written_in("tf2ir", None)
    activation_type: str = written_in("tf2ir", "None")
    input_multipliers: tuple[int, ...] = written_in("tflite_int8", ())  # the tflite_int8 dialect's: sub.cc's numbers
    input_shifts: tuple[int, ...] = written_in("tflite_int8", ())
    left_shift: int = written_in("tflite_int8", LEFT_SHIFTS[8])
    output_multiplier: int | None = written_in("tflite_int8", None)
    output_shift: int | None = written_in("tflite_int8", None)
    output_min: int = written_in("tflite_int8", -128)
    output_max: int = written_in("tflite_int8", 127)

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.shape)

    @property
    def requantization(self) -> CommonScaleRequantization:
        if self.on_pow2_grids:
            return shift_requantization([self.log2scale_of_input(k) for k in range(2)], self.log2scale_of_output(), self.activation_type)
        return multiplier_requantization(self.input_grids, self.output_grid, self.left_shift, self.input_multipliers, self.input_shifts,
                                         self.output_multiplier, self.output_shift, (self.output_min, self.output_max))

    def shifts(self) -> list[Shift]:
        if not self.on_pow2_grids:
            return []
        first, second = (self.log2scale_of_input(k) for k in range(2))
        return [Shift("input0_log2scale - input1_log2scale", first - second, signed=True),
                Shift("output_log2scale - the coarser input's", self.log2scale_of_output() - min(first, second), signed=True)]

    def fused_operators(self) -> list[str]:
        return ["sub", "requantize", *(self.activation_operators() if self.on_pow2_grids else ["clamp"])]

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> int | None:
        return None if self.on_pow2_grids else 2 * (2**self.activation_bits - 1) << self.left_shift


def is_difference_of_activations(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return len(node.inputs) == 2 and not any(index.is_const(tensor) for tensor in node.inputs)


def match_sub(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    layer = Layer(name=node.name, op="sub", inputs=list(node.inputs), output=f"{node.name}:0", nodes=[node.name])
    absorb_activation(layer, index)
    return layer


def sub_fields(layer: Layer, ctx: IrContext) -> dict:
    activation_named(layer.activation, f"layer {layer.ir_name}: ")
    shapes = [ctx.graph.shape(tensor) for tensor in (*layer.inputs, layer.output)]
    if any(shape is None or list(shape[1:]) != list(shapes[-1][1:]) for shape in shapes):
        raise IrError(f"layer {layer.ir_name}: sub takes two inputs of its output's shape, got {shapes}")
    first, second = layer.inputs
    return {"shape": [int(v) for v in shapes[-1][1:]], "activation_type": layer.activation,
            "input0_log2scale": ctx.log2scale(first), "input1_log2scale": ctx.log2scale(second),
            "output_log2scale": ctx.log2scale(layer.output),
            "input0_name": ctx.producer_name(first), "input1_name": ctx.producer_name(second)}


def sub_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    """sub.cc's Prepare: the requantization of ADD's (twice the larger input scale), of general scales at 16 bits."""
    shapes = [tuple(model.tensor(index).shape[1:]) for index in (*operator.inputs, operator.outputs[0])]
    if len(set(shapes)) != 1 or any(model.tensor(index).data is not None for index in operator.inputs):
        raise TfliteError(f"{model.path}: operator {operator.index} (SUB) of shapes {[list(shape) for shape in shapes]}; the IR's sub "
                          "takes two computed tensors of one shape")
    if model.tensor(operator.outputs[0]).dtype == "INT16" and operator.option("potScaleInt16", True):
        raise TfliteError(f"{model.path}: operator {operator.index} (SUB) with pot_scale_int16: the IR computes the 16x8 SUB of "
                          "general scales (pot_scale_int16 false)")
    (first_scale, first_zero), (second_scale, second_zero), (output_scale, output_zero) = (
        scale_and_zero_point(model, index) for index in (*operator.inputs, operator.outputs[0]))
    left_shift = LEFT_SHIFTS[activation_bits(model, operator)]
    (first_multiplier, first_shift), (second_multiplier, second_shift), (multiplier, shift) = common_scale_multipliers(
        first_scale, second_scale, output_scale, left_shift)
    return {"shape": [int(v) for v in shapes[0]], "input_scales": [first_scale, second_scale],
            "input_zero_points": [first_zero, second_zero], "input_multipliers": [first_multiplier, second_multiplier],
            "input_shifts": [first_shift, second_shift], "left_shift": left_shift, "output_multiplier": multiplier,
            "output_shift": shift, "output_scale": output_scale, "output_zero_point": output_zero, **clamp_fields(model, operator)}, {}


def sub_arithmetic(model: IntegerModelBuilder, inputs: list, requantization: CommonScaleRequantization):
    """Each input rescaled to the common scale (core/ir/common_scale.py: TF2IR's the finer aligned to the coarser, half
    up; TFLite's twice the larger input scale); the second negated after its rounding, as TFLite subtracts it; the
    difference rescaled to the output, plus its zero point, clamped."""
    first, second = rescaled_operands(model, inputs, requantization)
    difference = model.op("AddV2", [first, model.op("Mul", [second, model.const("minus_one", -1)])])
    return onto_output(model, requantization.output_rescale.applied(model, difference), requantization.output_zero_point,
                       requantization.clamp)


def record_sub(model: IntegerModelBuilder, record: SubLayer):
    return sub_arithmetic(model, model.inputs, record.requantization)


def sub_kernel(record: SubLayer, params: dict, inputs: list) -> np.ndarray:
    if record.activation_bits == 8:
        return pair_lookup(pair_table(record_sub, record), *inputs)
    return record_sub(ArrayModelBuilder(list(inputs), [], 0, "None"), record).astype(record.output_grid.dtype)


SUB = register_op(IrOp("sub", SubLayer,
                       AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION,
                                    integer_model=on_log2scales(sub_arithmetic, shift_requantization)),
                       (Pattern("sub", ("Sub",), match_sub, applies=is_difference_of_activations),), sub_fields, sub_kernel,
                       input_kinds=("input0", "input1"), builders={"SUB": sub_from_tflite}, activation_widths=(8, 16),
                       elementwise=record_sub))
'''}

WRITER = '''

def _sub(writer: TfliteWriter, layer: Layer) -> None:
    inputs = [writer.activation(tensor) for tensor in layer.inputs]
    general_scales = {"potScaleInt16": False} if writer.table.bits == 16 else {}  # the 16x8 SUB the converter writes
    writer.operator("SUB", inputs, [writer.activation(layer.output)], *writer.options(
        "SubOptions", fusedActivationFunction=writer.fused(layer), **general_scales))


WRITERS["sub"] = OperatorWriter(_sub, written("SUB"))
'''

CONVERTER = '''
CONVERTERS["SUB"] = _binary("subtract", "sub")
FLOAT_ONLY = FLOAT_ONLY - {"SUB"}  # an int8 file's SUB is read too: the IR computes it
'''

# what the test writes: new files, lines appended to a file, a line of a configuration changed
PLACES = OPERATION_FOLDER
APPENDED = {"core/backends/tflite/ops.py": WRITER, "core/frontend/tflite_graph.py": CONVERTER}
EDITED = {"conf/target/accel_tflite.yaml": ("operations: [add]", "operations: [add, sub]")}  # the pattern that lets it on


def _git(project: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@localhost", *args], cwd=project, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def project_with_a_new_operation(tmp_path_factory) -> Path:
    copy = copy_of_the_project(tmp_path_factory.mktemp("project"))
    _git(copy, "init", "-q")
    _git(copy, "add", "-A")
    _git(copy, "commit", "-q", "-m", "the project")
    for name, text in PLACES.items():
        assert not (copy / name).exists(), name
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text(text)
    for name, text in APPENDED.items():
        with open(copy / name, "a") as file:
            file.write(text)
    for name, (old, new) in EDITED.items():
        assert (copy / name).read_text().count(old) == 1, name
        (copy / name).write_text((copy / name).read_text().replace(old, new))
    _git(copy, "add", "-A")
    return copy


def test_the_operation_touches_at_most_four_files_outside_its_folder(project_with_a_new_operation):
    """Counted from the diff of the copy, not from a list of places: an element-wise operation is its folder, its
    .tflite writer, its float reader's converter and the accelerator pattern that names it; no backend file (the README
    says so)."""
    changed = [line.split("|")[0].strip() for line in _git(project_with_a_new_operation, "diff", "--cached", "--stat=400").splitlines()
               if "|" in line]
    outside = [name for name in changed if not name.startswith("core/ir/ops/sub/")]
    assert changed and len(outside) <= 4, changed
    readme = (PROJECT_ROOT / "README.md").read_text()
    section = " ".join(readme[readme.index("Adding an IR operation"):readme.index("Adding a fused activation")].split())
    assert f"an element-wise operation touches {len(outside)} files outside its folder" in section, outside


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
                  "calib.num_images=64", "data.eval_num_images=60", f"store.cache_dir={cache}", f"export_dir={out}", "pictures=false")
    assert ran.returncode == 0, ran.stderr[-3000:]
    layers = json.loads((project / out / "emit_ir" / "net_def.json").read_text())
    assert [layer["operation"] for layer in layers].count("sub") == 1
    metrics = json.loads((project / out / "metrics.json").read_text())
    assert metrics["codegen.bitexact"] == 1.0 and metrics["simulate.layer_agreement_min"] == 1.0, metrics
    return metrics


@pytest.mark.parametrize("target", ["tf2ir", "tflite_int8", "tflite_int16x8", "accel_tflite"])
def test_the_new_operation_runs_all_stages_bit_exact(project_with_a_new_operation, model_cache, target):
    project = project_with_a_new_operation
    model = subtracting_model(project / "subtracting.keras")
    metrics = _run_to_codegen(project, model_cache, target, model, "keras", f"out_{target}")
    if target == "tf2ir":
        assert metrics["simulate.end_point_agreement"] == 1.0  # the annotated graph computes the IR's integers
    else:
        assert metrics["simulate.reference_agreement"] == 1.0  # TFLite's reference kernels, on the .tflite it wrote
    if target == "accel_tflite":  # lowered from its element-wise definition: on the accelerator, not the host
        groups = json.loads((project / f"out_{target}" / "partition" / "partition_plan.json").read_text())["groups"]
        assert [group["target"] for group in groups if group["operation"] == "sub"] == ["accel"], groups


@pytest.mark.slow  # a written file read back is tested for the writers at large (test_tflite_export.py); this is sub's own
def test_the_tflite_it_wrote_is_read_back_as_its_own_ir(project_with_a_new_operation, model_cache):
    """The .tflite tflite_int8 wrote, SUB and all, read back as a model: its own IR again, bit-exact."""
    project = project_with_a_new_operation
    if not (project / "out_tflite_int8" / "emit_ir" / "model.tflite").exists():
        _run_to_codegen(project, model_cache, "tflite_int8", subtracting_model(project / "subtracting.keras"), "keras", "out_tflite_int8")
    written = project / "written.tflite"
    shutil.copy(project / "out_tflite_int8" / "emit_ir" / "model.tflite", written)
    again = _run_to_codegen(project, model_cache, "tflite_int8", written, "tflite", "out_read_back")
    assert again["simulate.reference_agreement"] == 1.0
