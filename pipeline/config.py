"""The configuration schema: Hydra structured configs for every group.

`register()` puts the schema in Hydra's ConfigStore as `schema`, which
conf/config.yaml lists first in its defaults, so every composed config (from
run.py, from tests, and from DVC's Hydra composition through hydra_plugins/) is
typed: an unknown key or a value outside an Enum fails at composition, naming
the key and listing the choices. Constraints that types cannot say (a positive
batch size, a fraction) live next to the field as `metadata` and are checked by
`validate`, before any stage runs.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from dataclasses import dataclass, field, make_dataclass
from enum import Enum
from typing import Any, Optional

import psutil
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from core.backends.accel.ops import host_only_errors
from core.backends.accel.target import AcceleratorError, AcceleratorSpec, accelerator_of
from core.backends.c.build import DEFAULT_CFLAGS, cflag_errors
from core.data.datasets import SPLITS as DATA_SPLITS
from core.frontend.builtin_models import digits_training_bytes
from core.limits import MEBIBYTE, human_bytes
from core.quantize.auto import AUTO
from core.quantize.calibration.histogram import histogram_bytes
from core.quantize.calibration.methods import CHECKS, METHODS, auto_candidates, methods_from_data, weight_methods
from core.quantize.schemes import SCHEMES, runtime_of
from pipeline.params import (DataKind, ModelFormat, Pow2Rounding, Relu6Equalization, Resize, Task,
                             to_plain)
from pipeline.stages import STAGE_NAMES, STAGES

__all__ = ["CalibMethod", "Config", "ConfigError", "DataKind", "FileRef", "ModelFormat", "Pow2Rounding", "Relu6Equalization", "Resize", "Task", "WeightMethod",
           "flatten", "register", "select", "to_plain", "validate"]


class ConfigError(ValueError):
    """A configuration value that no stage could work with."""


def _positive(default: Any) -> Any:
    return field(default=default, metadata={"check": "positive"})


def _fraction(default: Any) -> Any:
    return field(default=default, metadata={"check": "fraction"})


@dataclass
class FileRef:
    """A file the product needs: a local `path`, or a `url` whose `sha256` pins its content."""

    path: Optional[str] = None
    url: Optional[str] = None
    sha256: Optional[str] = None


@dataclass
class PreprocessConfig:
    size: list[int] = field(default_factory=lambda: [8, 8])  # H, W the network takes
    channels: int = _positive(1)
    resize: Resize = Resize.none
    scale: float = _positive(1.0)  # x / scale + offset
    offset: float = 0.0


@dataclass
class BuiltinConfig:
    """Settings of a model the project builds and trains itself."""

    name: str = "digits"
    seed: int = 0
    epochs: int = _positive(20)
    batch_size: int = _positive(32)
    learning_rate: float = _positive(0.003)
    holdout_fraction: float = _fraction(0.2)  # the held-out split accuracy is reported on
    width: float = _positive(1.0)  # channel multiplier


@dataclass
class ModelConfig:
    name: str = MISSING
    format: ModelFormat = MISSING
    file: FileRef = field(default_factory=FileRef)
    builtin: Optional[BuiltinConfig] = None
    input_tensor: Optional[str] = None
    end_points: list[str] = field(default_factory=list)
    task: Task = Task.classification
    num_classes: Optional[int] = None
    preprocess: PreprocessConfig = field(default_factory=PreprocessConfig)
    test_image: FileRef = field(default_factory=FileRef)


# files a run does without: no test image (or one named only by a digest that is not in the cache), and emit_ir
# takes the first evaluation image
OPTIONAL_FILES = ("model.test_image",)


@dataclass
class DataConfig:
    name: str = MISSING
    kind: DataKind = MISSING
    # keyed by content, not by location: moving the data does not re-run anything
    path: Optional[str] = field(default=None, metadata={"content": True})
    calib_split: str = "train"
    eval_split: str = "test"
    eval_num_images: Optional[int] = _positive(None)  # None: the whole evaluation split
    holdout_fraction: float = _fraction(0.2)  # digits: the held-out split
    split_seed: int = 0  # digits


@dataclass
class AutoConfig:
    """calib.method=auto (core/quantize/auto.py): the methods it chooses among per tensor (by default the registry's
    that set `auto_rank`, in its order), its time limit, and how many calibration images it scores each candidate
    table on."""

    methods: list[CalibMethod] = field(default_factory=lambda: [CalibMethod[name] for name in auto_candidates()])
    budget_s: float = _positive(600.0)
    num_images: int = _positive(256)
    # a candidate clipping more of an activation's calibration values is not tried (its method's choice weighing
    # clipping, mse's, excepted): quality.max_clipped_fraction's default, so auto makes no table the guard refuses
    max_clipped_fraction: float = _fraction(0.01)


# calib.method's choices: every registered threshold method (core/quantize/calibration/methods/, one file each) and
# auto, the per-tensor search over them (core/quantize/auto.py)
CalibMethod = Enum("CalibMethod", {name: name for name in [*sorted(METHODS), AUTO]})
# calib.weight_method's: the registered methods that also choose weights' ranges
WeightMethod = Enum("WeightMethod", {name: name for name in weight_methods()})


@dataclass
class _CalibBase:
    method: CalibMethod = CalibMethod.mse
    num_images: int = _positive(256)
    batch_size: int = _positive(32)
    pow2_rounding: Pow2Rounding = Pow2Rounding.ceil
    num_bins: int = _positive(2048)
    weight_method: WeightMethod = WeightMethod.mse  # mse: least output error, may saturate outliers; minmax: nothing saturates
    equalize: bool = True  # cross-layer equalization of consecutive conv/dwconv layers (core/quantize/equalize.py)
    equalize_relu6: Relu6Equalization = Relu6Equalization.keep  # keep the clamp (bounded scales) | relu: replace it
    bias_correction: bool = True  # correct each layer's bias for the mean shift its weight quantization causes
    auto: AutoConfig = field(default_factory=AutoConfig)
    keep_float: list[str] = field(default_factory=list)  # layers (TF or IR names) that stay float on the host


# calib: the settings above and each method's own (`calib.percentile`, ...), declared beside the method
CalibConfig = make_dataclass("CalibConfig", [
    (setting.name, type(setting.default), field(default=setting.default, metadata={"check": setting.check} if setting.check else {}))
    for method in METHODS.values() for setting in method.settings], bases=(_CalibBase,))


@dataclass
class TargetConfig:
    name: str = "tf2ir"
    # how integers mean reals, with its own settings: the `target/scheme` group, one option per registered scheme
    # (core/quantize/schemes/: SCHEMES, each its `settings`), chosen by the target's defaults list or by
    # `target/scheme=tflite_int8`; its keys are `target.scheme.*`
    scheme: Any = MISSING
    accelerator: Optional[AcceleratorSpec] = None  # none: everything runs on the host (schema: core/backends/accel/target.py)


@dataclass
class FoldCheckConfig:
    strict: bool = False
    # relative to the largest |end point| of the original graph on the sample
    tolerance: float = _positive(1e-4)
    sample_batch: int = _positive(2)
    seed: int = 0


@dataclass
class LimitsConfig:
    # what a run may allocate: declared sizes (a model file, its constants, a batch of images and
    # their activations) are checked against it before allocating; batches shrink to fit it
    memory_mb: int = _positive(4096)


@dataclass
class SensitivityConfig:
    # per layer, end-point SQNR with only that layer quantized and with all but it (annotate stage):
    # two annotated graphs per layer, so off unless asked for
    enabled: bool = False
    num_images: int = _positive(32)  # evaluation images each variant runs on


@dataclass
class QualityConfig:
    """Limits a run's measured quality must meet (pipeline/quality.py): beyond one, the run stops after the
    stage that measured it (exit status 3), naming the tensor or end point and the likely causes."""

    enforce: bool = True  # false: report a failed limit (closing table, MLflow tag `quality`) and run on
    max_clipped_fraction: float = _fraction(0.01)  # of an activation's (or the input's) calibration values
    min_input_levels: float = 16.0  # quantization steps of the network input the calibration data must span
    min_sqnr_db: float = 6.0  # end-point SQNR against the float model (annotate, simulate)
    max_top1_drop: float = _fraction(0.05)  # float top-1 minus quantized top-1, as a fraction (0.05: 5 points)


@dataclass
class StoreConfig:
    url: str = ".store"  # a directory, or any fsspec URL (s3://bucket/prefix, memory://x, ...)
    cache_dir: str = "${oc.env:QUANTTOOL_CACHE,.cache}"  # downloads (model files), keyed by sha256
    # keyword arguments of the URL's fsspec filesystem, e.g. s3: {endpoint_url: http://host:9000, anon: false};
    # credentials belong in the environment (AWS_ACCESS_KEY_ID, ...): values of secret-like keys are not logged
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class CodegenConfig:
    # the C compiler's optimization and instruction-set flags for the host program (codegen stage);
    # [-O3, -march=native] builds for the machine that compiles it: its AVX2 / AVX-512 VNNI int8
    # microkernels (core/backends/c/runtime/qt_gemm.h), a binary that may not run on an older CPU
    cflags: list[str] = field(default_factory=lambda: list(DEFAULT_CFLAGS))


@dataclass
class TrackingConfig:
    # register the run's logged model (pipeline/logged_model.py) as a new version of this model in MLflow's registry
    register: Optional[str] = None


@dataclass
class SweepConfig:
    # how a sweep's verdict ranks its jobs that finished and passed every quality guard: the first metric decides,
    # the next break ties; each a '<stage>.<metric>' (a stage's headline metric), higher is better, a leading '-' lower
    rank_by: list[str] = field(default_factory=lambda: ["annotate.sqnr_db_min", "annotate.top1"])


@dataclass
class Config:
    model: ModelConfig = MISSING
    data: DataConfig = MISSING
    calib: CalibConfig = field(default_factory=CalibConfig)
    target: TargetConfig = field(default_factory=TargetConfig)
    fold_check: FoldCheckConfig = field(default_factory=FoldCheckConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    sensitivity: SensitivityConfig = field(default_factory=SensitivityConfig)
    quality: QualityConfig = field(default_factory=QualityConfig)
    codegen: CodegenConfig = field(default_factory=CodegenConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    tracking_uri: str = "sqlite:///mlflow.db"
    export_dir: Optional[str] = None
    # stop after this stage (a stage name), e.g. to iterate on calibration only
    until: Optional[str] = None
    # draw each stage's pictures (matplotlib: a tenth of the default model's run, a quarter of a small model's); false:
    # the same metrics, series and tables without them (a wide sweep, CI), DVC showing a card in each picture's place
    pictures: bool = True


SCHEMA_NAME = "schema"


SCHEME_GROUP = "target/scheme"


def register() -> None:
    store = ConfigStore.instance()
    store.store(name=SCHEMA_NAME, node=Config)
    for name, scheme in SCHEMES.items():  # each scheme's settings, typed: a typo or a bad value fails at composition
        store.store(group=SCHEME_GROUP, name=name, node=scheme.settings)
    # `run.py --help` lists the methods from their registry (conf/hydra/help/quanttool.yaml: ${calib_methods_help:})
    OmegaConf.register_new_resolver("calib_methods_help", calib_methods_help, replace=True)
    OmegaConf.register_new_resolver("schemes_help", lambda: ", ".join(SCHEMES), replace=True)


def calib_methods_help() -> str:
    """A line per calib.method: its name and summary, then its own settings."""
    lines = []
    for name in sorted(METHODS):
        method = METHODS[name]
        settings = "".join(f"; calib.{setting.name} (default {setting.default}): {setting.help}" for setting in method.settings)
        lines.append(f"  {name:<12} {method.summary}{settings}")
    lines.append(f"  {AUTO:<12} every method scored on end-point SQNR, then refined tensor by tensor (calib.auto.*)")
    return "\n".join(lines)


TARGET_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")

def schema_for(composed: DictConfig) -> DictConfig:
    """The schema of a config composed elsewhere and read back as plain data (params.yaml): Config, its `target.scheme`
    typed by the settings of the scheme it names, as Hydra's composition types it from the `target/scheme` group."""
    schema = OmegaConf.structured(Config)
    name = OmegaConf.select(composed, "target.scheme.name", default=None)
    if name is None:
        return schema  # no scheme named: validate says what is missing
    if name not in SCHEMES:
        raise ConfigError(f"target.scheme.name={name!r}: not a quantization scheme; choose one of {', '.join(SCHEMES)}")
    schema.target.scheme = OmegaConf.structured(SCHEMES[name].settings)
    return schema


def validate(cfg: DictConfig) -> Config:
    """Typed view of the composed config; raises ConfigError naming the first bad key."""
    typed = typing.cast(Config, OmegaConf.to_object(cfg))
    _check_scheme(typed.target.scheme)
    _check_known_keys(cfg, typed, prefix="")
    _check_constraints(typed, prefix="")
    if typed.until is not None:
        if typed.until not in STAGE_NAMES:
            raise ConfigError(f"until={typed.until!r}: not a stage; choose one of {', '.join(STAGE_NAMES)}")
    for error in rank_by_errors(typed.sweep.rank_by):
        raise ConfigError(error)
    if typed.tracking.register is not None and not REGISTERED_MODEL_NAME.fullmatch(typed.tracking.register):
        raise ConfigError(f"tracking.register={typed.tracking.register!r}: a registered model's name starts with a letter or digit "
                          "and holds only letters, digits, '_', '-' and '.' (at most 128)")
    if typed.model.format is not ModelFormat.builtin and not (typed.model.file.path or typed.model.file.url):
        raise ConfigError(f"model {typed.model.name!r}: format {typed.model.format.value} needs model.file.path or model.file.url")
    for key in ("calib_split", "eval_split"):
        splits = DATA_SPLITS[typed.data.kind.value]
        if getattr(typed.data, key) not in splits:
            raise ConfigError(f"data.{key}={getattr(typed.data, key)!r}: a {typed.data.kind.value} data set has no such split; "
                              f"choose one of {', '.join(splits)}")
    _check_auto(typed)
    if histogram_bytes(typed.calib.num_bins, 1) > typed.limits.memory_mb * MEBIBYTE:
        raise ConfigError(f"calib.num_bins={typed.calib.num_bins}: one tensor's histogram needs "
                          f"{human_bytes(histogram_bytes(typed.calib.num_bins, 1))}, over limits.memory_mb={typed.limits.memory_mb}; "
                          "lower calib.num_bins (2048 is what the methods are tuned for)")
    for error in cflag_errors(typed.codegen.cflags):
        raise ConfigError(error)
    target = typed.target
    _check_runtime(target)
    if not TARGET_NAME.fullmatch(target.name):
        raise ConfigError(f"target.name={target.name!r}: must start with a letter and hold only letters, digits, '_', '-' and '.' "
                          "(at most 64): it names files and C functions")
    for error in target.scheme.errors():
        raise ConfigError(error)
    if typed.target.accelerator is not None:
        try:
            accelerator = accelerator_of(to_plain(typed.target), origin=f"target {typed.target.name}")
        except AcceleratorError as error:
            raise ConfigError(str(error)) from error
        for error in host_only_errors(accelerator):
            raise ConfigError(f"target {typed.target.name}: {error}")
    if typed.model.format is ModelFormat.builtin and typed.model.builtin is None:
        raise ConfigError(f"model {typed.model.name!r}: format builtin needs a model.builtin section")
    if typed.model.format is ModelFormat.builtin:
        # TensorFlow trains in its own memory, which limits.memory_mb (the pipeline's arrays) does not bound: refused
        # where even the larger of the two cannot hold it, before minutes of training end in ResourceExhaustedError
        training = digits_training_bytes(typed.model.builtin.width, typed.model.builtin.batch_size)
        room = max(typed.limits.memory_mb * MEBIBYTE, psutil.virtual_memory().total)
        if training > room:
            raise ConfigError(f"model.builtin.width={typed.model.builtin.width:g}: training the built-in model needs at least "
                              f"{human_bytes(training)} (its weights, their gradients and Adam's moments, a batch of "
                              f"{typed.model.builtin.batch_size} images' activations), more than this machine's "
                              f"{human_bytes(psutil.virtual_memory().total)} and limits.memory_mb={typed.limits.memory_mb}; "
                              "lower model.builtin.width (the default is 1)")
    return typed


# MLflow's registry takes most names; these are safe in its URIs (models:/<name>/<version>) and on every store
REGISTERED_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def rank_by_errors(rank_by: list[str]) -> list[str]:
    """What is wrong with sweep.rank_by: each entry a stage's headline metric, '-' before one that is better lower."""
    if not rank_by:
        return ["sweep.rank_by=[]: name at least one metric, e.g. [annotate.sqnr_db_min, annotate.top1]"]
    headline = {f"{stage.name}.{name}" for stage in STAGES for name in stage.headline}
    return [f"sweep.rank_by: {entry!r} is not a stage's headline metric; choose among {', '.join(sorted(headline))} "
            "(a leading '-' ranks lower first)" for entry in rank_by if entry.removeprefix("-") not in headline]


def _schema_node(node_type: Any) -> Any:
    """The dataclass a field's type holds (Optional[X] -> X), or None where any key goes (Any, a dict, a list)."""
    arguments = [argument for argument in typing.get_args(node_type) if argument is not type(None)]
    if dataclasses.is_dataclass(node_type):
        return node_type
    if typing.get_origin(node_type) is typing.Union and len(arguments) == 1 and dataclasses.is_dataclass(arguments[0]):
        return arguments[0]
    return None


# Hydra's command-line options that take the next argument as their value (`-sc query=bash`, `--cfg job`)
HYDRA_VALUE_OPTIONS = {"-sc", "--shell-completion", "-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir", "-c",
                       "--cfg", "-p", "--package", "-i", "--info", "--experimental-rerun"}


def command_line_overrides(argv: list[str]) -> list[str]:
    """The overrides among run.py's arguments: not an option, not an option's value."""
    return [argument for previous, argument in zip(["", *argv], argv)
            if not argument.startswith("-") and previous not in HYDRA_VALUE_OPTIONS]


def unknown_key(overrides: list[str]) -> str | None:
    """A command-line override whose key the schema has no place for (`calib.methd=kl`), said with the nearest keys
    (`did you mean calib.method?`), or None. Appends (+key), deletions (~key), groups (a/b=), Hydra's own keys and
    keys under a node that takes any key (target.scheme.*, store.options.*) are left to Hydra."""
    for override in overrides:
        key = override.split("=", 1)[0]
        if "=" not in override or key.startswith(("+", "~", "hydra", "-")) or "/" in key:
            continue
        node, walked = Config, []
        for part in key.split("."):
            hints = typing.get_type_hints(node)
            if part not in hints:
                place = ".".join(walked) or "the config"
                nearest = difflib.get_close_matches(part, list(hints), n=3)
                nearest_keys = ", ".join(".".join([*walked, name]) for name in nearest)
                hint = f"did you mean {nearest_keys}?" if nearest else f"the keys of {place}: {', '.join(sorted(hints))}"
                return f"{override}: {place} has no key {part!r}; {hint} (`python run.py --cfg job` prints every key)"
            walked.append(part)
            node = _schema_node(hints[part])
            if node is None:
                break
    return None


def _check_scheme(scheme: Any) -> None:
    """`target.scheme` is one of the `target/scheme` group's options, not a value set in its place (the key was a name
    before the schemes owned their settings), and its name is its option's: another scheme is chosen by the group, not
    by renaming these settings."""
    chosen = next((name for name, registered in SCHEMES.items() if type(scheme) is registered.settings), None)
    if chosen is None:
        raise ConfigError(f"target.scheme={scheme!r}: a scheme is chosen with target/scheme=NAME, one of {', '.join(SCHEMES)}; "
                          "its settings are target.scheme.* (`python run.py --cfg job` prints them)")
    if scheme.name != chosen:
        raise ConfigError(f"target.scheme.name={scheme.name}: these are {chosen}'s settings; choose another scheme with "
                          f"target/scheme={scheme.name}")


def _check_runtime(target: TargetConfig) -> None:
    """The scheme's integers are made exact against the runtime `target.scheme.runtime` names."""
    try:
        runtime_of(target)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def _check_auto(typed: Config) -> None:
    searched = typed.calib.auto.methods
    searchable = methods_from_data()  # auto scores tables computed from data
    unsearchable = [method.value for method in searched if method.value not in searchable]
    if not searched or unsearchable:
        raise ConfigError(f"calib.auto.methods={[method.value for method in searched]}: list the threshold methods auto chooses "
                          f"among, from {', '.join(searchable)}"
                          + (f" ({', '.join(unsearchable)} cannot be searched)" if unsearchable else ""))


def _check_known_keys(node: Any, typed: Any, prefix: str) -> None:
    """Every key of the composed config is one of the schema's: a `+calib.foo=1` Hydra adds past the schema is
    refused, not carried silently into MLflow's params."""
    if not dataclasses.is_dataclass(typed) or not isinstance(node, DictConfig):
        return
    fields = {spec.name for spec in dataclasses.fields(typed)}
    for key in node.keys():
        if key not in fields:
            raise ConfigError(f"{prefix}{key}: not a config key; {prefix.rstrip('.') or 'the config'} has "
                              f"{', '.join(sorted(fields))} (`python run.py --cfg job` prints them all)")
        _check_known_keys(node[key], getattr(typed, key), prefix=f"{prefix}{key}.")


def _check_constraints(node: Any, prefix: str) -> None:
    if not dataclasses.is_dataclass(node):
        return
    for spec in dataclasses.fields(node):
        value = getattr(node, spec.name)
        key = f"{prefix}{spec.name}"
        check = spec.metadata.get("check")
        if check and value is not None:
            predicate, expected = CHECKS[check]  # shared with the calibration methods' own settings
            if not predicate(value):
                raise ConfigError(f"{key}={value!r}: must be {expected}")
        _check_constraints(value, prefix=f"{key}.")


def select(cfg: Any, dotted: str) -> Any:
    """cfg['a.b.c'] for a typed config."""
    node = cfg
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}, for MLflow params."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, prefix=f"{name}."))
        else:
            flat[name] = value
    return flat
