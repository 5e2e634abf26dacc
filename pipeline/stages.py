"""The stage graph: every stage declared once, as data.

A stage's declaration is everything the runner, the store, MLflow and dvc.yaml
need: the function that implements it, the upstream artifacts it consumes, the
config keys it reads (and may only read), and the source files whose content
is its code version. `python -m pipeline.dvcgen` writes dvc.yaml from this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    name: str  # as in artifact paths and metric names
    entry: str  # "module:function", imported only when the stage runs
    inputs: tuple[str, ...]  # upstream stage names, in the order the function receives them
    params: tuple[str, ...]  # dotted config keys the function reads
    code: tuple[str, ...]  # files or packages (from the project root) whose source is the stage's code version
    description: str = ""


_GRAPH_CODE = ("core/frontend/graph.py",)
# what calibration and the IR need of a target: its number format, not its accelerator
_TARGET_FORMAT = ("target.name", "target.bits", "target.symmetric", "target.pow2_scales", "target.per_channel_weights",
                  "target.input_log2scale", "target.min_log2scale", "target.max_log2scale")

_IR_CODE = ("core/ir/io.py", "core/ir/simulator.py", "core/ir/ops", "core/frontend/layers.py", "schemas/tf2ir_ir.schema.json")

STAGES: tuple[Stage, ...] = (
    Stage(
        name="import",
        entry="stages.import_model:run",
        inputs=(),
        params=(
            "model.format",
            "model.file",
            "model.builtin",
            "model.input_tensor",
            "model.end_points",
        ),
        code=("stages/import_model.py", "core/frontend/importer.py", "core/frontend/builtin_models.py", "core/data/datasets.py", *_GRAPH_CODE),
        description="read the TensorFlow model into the project's graph",
    ),
    Stage(
        name="fold_check",
        entry="stages.fold_check:run",
        inputs=("import",),
        params=("fold_check",),
        code=("stages/fold_check.py", "core/frontend/folding.py", *_GRAPH_CODE),
        description="fold BatchNorm into conv weights and verify the folded graph",
    ),
    Stage(
        name="calibrate",
        entry="stages.calibrate:run",
        inputs=("fold_check",),
        params=("calib", *_TARGET_FORMAT, "data", "model.preprocess"),
        code=("stages/calibrate.py", "core/quantize/calibration", "core/quantize/table.py", "core/frontend/layers.py", "core/ir/ops",
              "core/data/datasets.py", "core/frontend/tf_runtime.py", "core/quantize/statistics.py", *_GRAPH_CODE),
        description="collect activation statistics and choose each tensor's threshold and scale",
    ),
    Stage(
        name="annotate",
        entry="stages.annotate:run",
        inputs=("fold_check", "calibrate"),
        params=("data", "model.preprocess", "model.task"),
        code=("stages/annotate.py", "core/quantize/annotate.py", "core/quantize/evaluation.py", "core/quantize/table.py", "core/frontend/layers.py",
              "core/ir/ops", "core/data/datasets.py", "core/frontend/tf_runtime.py", *_GRAPH_CODE),
        description="insert simulated quantization and measure its error against the float graph",
    ),
    Stage(
        name="emit_ir",
        entry="stages.emit_ir:run",
        inputs=("fold_check", "calibrate"),
        params=(*_TARGET_FORMAT, "target.min_shift", "target.max_shift", "model.test_image", "model.preprocess", "data"),
        code=("stages/emit_ir.py", *_IR_CODE, "core/quantize/table.py", "core/data/datasets.py", *_GRAPH_CODE),
        description="write the TF2IR layer IR (net_def.json + params/*.npy) with a test image's integer tensors",
    ),
    Stage(
        name="simulate",
        entry="stages.simulate:run",
        inputs=("emit_ir", "fold_check", "annotate"),
        params=("data", "model.preprocess", "model.task"),
        code=("stages/simulate.py", *_IR_CODE, "core/quantize/evaluation.py", "core/frontend/tf_runtime.py", "core/data/datasets.py", *_GRAPH_CODE),
        description="run the IR in integer arithmetic and compare it with the float and annotated graphs",
    ),
    Stage(
        name="partition",
        entry="stages.partition:run",
        inputs=("emit_ir",),
        params=("target.name", "target.accelerator"),
        code=("stages/partition.py", "core/backends/accel/partition.py", "core/backends/accel/target.py", "core/backends/accel/lowering.py", "core/backends/accel/isa.py", *_IR_CODE),
        description="split the IR between the target's accelerator and the host: fused groups, accelerator functions, pack/unpack",
    ),
    Stage(
        name="codegen",
        entry="stages.codegen:run",
        inputs=("emit_ir", "partition"),
        params=("data", "model.preprocess", "target.name"),
        # the C runtime headers are not .py files: listed themselves so their content keys the stage
        code=("stages/codegen.py", "core/backends/c/program.py", "core/backends/accel/codegen.py", "core/backends/accel/lowering.py", "core/backends/accel/isa.py",
              "core/backends/accel/partition.py", "core/backends/accel/target.py", "core/backends/c/runtime/qt_runtime.h", "core/backends/accel/runtime/qt_isa.h", *_IR_CODE,
              "core/data/datasets.py"),
        description="C99 for the host and instruction streams for the accelerator, compiled with the ISA simulator, "
                    "bit-exact against the integer simulator",
    ),
)

STAGE_NAMES: tuple[str, ...] = tuple(stage.name for stage in STAGES)


def stage_named(name: str) -> Stage:
    for stage in STAGES:
        if stage.name == name:
            return stage
    raise KeyError(f"no stage named {name!r}; stages: {', '.join(STAGE_NAMES)}")


def stages_until(last: str | None) -> tuple[Stage, ...]:
    if last is None:
        return STAGES
    return STAGES[: STAGE_NAMES.index(last) + 1]
