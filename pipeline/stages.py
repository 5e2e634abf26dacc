"""The stage graph: every stage declared once, as data.

A stage's declaration is everything the runner, the store, MLflow and dvc.yaml
need: the function that implements it, the upstream artifacts it consumes, the
config keys it reads (and may only read), its headline metrics (the few a person
compares runs by: git-tracked for DVC, the ones MLflow shows) and the per-layer
series it writes (`series/<name>.json`: DVC plots, MLflow tables with the layers' names). Its code version is the content of the
import closure of its entry module (pipeline/code_version.py), never a hand list.
`python -m pipeline.dvcgen` writes dvc.yaml from this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Series:
    """A series a stage writes as `series/<name>.json`: rows with an index field `x`, a name field `label` (the
    layer or tensor, the axis DVC's charts show) and value fields `y`. `absent_because` says which
    configurations do not give it (DVC's chart title says so: their revisions draw no points)."""

    name: str
    x: str
    y: tuple[str, ...]
    title: str
    y_label: str
    label: str = "layer"
    absent_because: str = ""


@dataclass(frozen=True)
class Stage:
    name: str  # as in artifact paths and metric names
    entry: str  # "module:function", imported only when the stage runs
    inputs: tuple[str, ...]  # upstream stage names, in the order the function receives them
    params: tuple[str, ...]  # dotted config keys the function reads
    description: str = ""
    headline: tuple[str, ...] = ()  # its metrics worth comparing runs by (those it reports of them)
    series: tuple[Series, ...] = ()  # what it may write under series/ (a series only some configurations give is absent otherwise)
    pictures: tuple[str, ...] = ()  # the PNGs it may draw (`<name>.png`; some only in some configurations)

    def __post_init__(self):
        # a stage that draws reads the `pictures` switch: its stored entries with and without pictures differ
        if self.pictures and "pictures" not in self.params:
            object.__setattr__(self, "params", (*self.params, "pictures"))

    @property
    def module(self) -> str:
        return self.entry.split(":")[0]

    def headline_of(self, metrics: dict[str, float]) -> dict[str, float]:
        """Its headline metrics among `metrics`, in declaration order (a run reports only those that apply)."""
        return {name: metrics[name] for name in self.headline if name in metrics}


# what calibration and the IR need of a target: its number format, not its accelerator
_TARGET_FORMAT = ("target.name", "target.scheme")


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
            "model.preprocess.size",  # the size of an input the model leaves open
            "limits",
        ),
        description="read the TensorFlow model into the project's graph",
        headline=("float_accuracy", "nodes", "quantization_aware"),
    ),
    Stage(
        name="fold_check",
        entry="stages.fold_check:run",
        inputs=("import",),
        params=("fold_check", "limits"),
        description="fold BatchNorm into conv weights and verify the folded graph",
        headline=("max_abs_diff", "batch_norms_folded"),
    ),
    Stage(
        name="calibrate",
        entry="stages.calibrate:run",
        inputs=("fold_check",),
        params=("calib", *_TARGET_FORMAT, "data", "model.preprocess", "limits"),
        description="collect activation statistics and choose each tensor's threshold and scale",
        headline=("clipped_fraction_max", "zero_range_tensors", "equalize_max_abs_diff", "auto_sqnr_db"),
        series=(Series("clipping", "tensor_index", ("clipped_fraction",), "clipped share of calibration values per activation",
                       "fraction beyond the threshold", label="tensor"),),
        pictures=("clipping", "histograms"),
    ),
    Stage(
        name="annotate",
        entry="stages.annotate:run",
        inputs=("fold_check", "calibrate"),
        params=("data", "model.preprocess", "model.task", "model.num_classes", "limits", "sensitivity"),
        description="insert simulated quantization and measure its error against the float graph (per layer: sensitivity)",
        headline=("top1", "top1_float", "top1_qat_graph", "top1_agreement", "sqnr_db_min", "cosine_min", "layer_sqnr_db_min",
                  "sensitivity_sqnr_db_min"),
        series=(Series("layer_sqnr", "layer_index", ("sqnr_db",), "float vs annotated: SQNR per layer output", "SQNR (dB)"),
                Series("sensitivity", "layer_index", ("only_this_sqnr_db", "all_but_this_sqnr_db"),
                       "sensitivity: end-point SQNR with only this layer / all but this layer quantized", "SQNR (dB)",
                       absent_because="computed only when sensitivity.enabled=true")),
        pictures=("layer_sqnr", "sensitivity"),
    ),
    Stage(
        name="emit_ir",
        entry="stages.emit_ir:run",
        inputs=("calibrate",),
        params=(*_TARGET_FORMAT, "model.test_image", "model.preprocess", "data"),
        description=("write the TF2IR layer IR (net_def.json + params/*.npy) with a test image's integer tensors "
                     "(tflite_int8: read from the model.tflite it writes beside it)"),
        headline=("layers", "constant_bytes"),
    ),
    Stage(
        name="simulate",
        entry="stages.simulate:run",
        inputs=("emit_ir", "fold_check", "calibrate", "annotate"),
        params=("data", "model.preprocess", "model.task", "model.num_classes", "limits", "target.scheme"),
        description=("run the IR in integer arithmetic and compare it with the float graph and, per layer, its reference path "
                     "(the annotated graph; tflite_int8: the interpreter of target.scheme.runtime, LiteRT's reference kernels or TFLM)"),
        headline=("reference_agreement", "end_point_agreement", "layer_agreement_min", "layer_max_lsb_difference", "top1", "sqnr_db_min"),
        series=(Series("layer_agreement", "layer_index", ("agreement",),
                       "integer simulator == its reference path (annotated graph; tflite_int8: TFLite's kernels), per layer",
                       "fraction of elements equal"),),
        pictures=("layer_agreement",),
    ),
    Stage(
        name="partition",
        entry="stages.partition:run",
        inputs=("emit_ir",),
        params=("target.name", "target.accelerator"),
        description="split the IR between the target's accelerator and the host: fused groups, accelerator functions, pack/unpack",
        headline=("layers_accel", "layers_host", "mac_share_accel", "pack_count", "unpack_count"),
        pictures=("partition",),
    ),
    Stage(
        name="codegen",
        entry="stages.codegen:run",
        inputs=("emit_ir", "partition"),
        params=("data", "model.preprocess", "target.name", "codegen"),
        description="C99 for the host and instruction streams for the accelerator, compiled with the ISA simulator, "
                    "bit-exact against the integer simulator",
        headline=("bitexact", "constant_bytes", "arena_bytes", "scratch_bytes", "accel_cycles", "accel_instructions"),
        series=(Series("cycles", "layer_index", ("cycles",), "accelerator cycles per layer, by the target's cost model", "cycles",
                       absent_because="given only by a target with an accelerator: accel, accel_small or accel_tflite"),),
        pictures=("cycles",),
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
