"""An operation is added as the README's "adding an operation" says: in a copy of the project, a new element-wise
operation, sub (a Keras Subtract of two activations), is declared in its own folder core/ir/ops/sub/ (pattern, fields,
the .tflite operator it is read from, and its arithmetic, one definition of both dialects that the annotated graph, the
simulator, the C and the accelerator render: `elementwise=`), with its .tflite writer in core/backends/tflite/ops.py, its
float reader's converter in core/frontend/tflite_graph.py and the accelerator pattern that names it; the files touched
outside its folder are counted from the copy's diff. It runs through all eight stages on tf2ir, tflite_int8,
tflite_int16x8 and accel_tflite (there on the accelerator), bit-exact: the simulator with the annotated graph on tf2ir,
with TFLite's reference kernels on the TFLite schemes, the generated C with the simulator on all four; and the .tflite
that tflite_int8 wrote is read back as a model (under --slow). Not yet: a record of its own (it is add's, whose fields it shares)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT, copy_of_the_project

OPERATION_FOLDER = {"core/ir/ops/sub/__init__.py": '''"""sub (a test's operation): the element-wise difference of two activations of one shape. Its record and fields
are add's (the same operands, grids and requantization: TFLite's SUB derives its numbers as ADD does); its arithmetic is
its own, one definition of both dialects (sub_arithmetic): each input rescaled to the common scale, the second negated,
the two summed, rescaled to the output. The annotated graph, the simulator, the C and the accelerator render it."""

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.graph import Graph, Node
from core.frontend.layers import AnnotateRule, GraphIndex, IntegerModelBuilder, Layer, Pattern, QKind
from core.ir.activations import absorb_activation
from core.ir.integer_kernel import ArrayModelBuilder, on_log2scales, pair_lookup, pair_table
from core.ir.op import IrOp, register_op
from core.ir.ops.add.emit import add_fields
from core.ir.ops.add.pattern import is_activation_sum
from core.ir.ops.add.record import AddLayer, AddRequantization, shift_requantization
from core.ir.ops.add.tflite import add_from_tflite
from core.ir.rescale import less_zero_point, onto_output


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


def sub_arithmetic(model: IntegerModelBuilder, inputs: list, requantization: AddRequantization):
    """Each input less its zero point, widened and rescaled to the common scale (TF2IR: the finer one aligned to the
    coarser, half up; TFLite's SUB: twice the larger input scale); the second negated after its rounding, as TFLite
    subtracts it; the sum rescaled to the output, plus its zero point, clamped."""
    first, second = (rescale.applied(model, model.op("Mul", [less_zero_point(model, tensor, zero_point),
                                                              model.const("left_shift", 1 << requantization.left_shift)]))
                     for tensor, zero_point, rescale in zip(inputs, requantization.input_zero_points, requantization.input_rescales))
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
                       (Pattern("sub", ("Sub",), match_sub, applies=is_activation_sum),), add_fields, sub_kernel,
                       input_kinds=("pl", "add"), builders={"SUB": add_from_tflite}, activation_widths=(8, 16),
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
                  "calib.num_images=64", "data.eval_num_images=60", f"store.cache_dir={cache}", f"export_dir={out}")
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
