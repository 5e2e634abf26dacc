"""Runs declared stages against the store: compute a key, reuse or run, commit.

A stage's key is the sha256 of its name, its code version (the digest of every
project file its entry module can run: pipeline/code_version.py), the config
subset it declares (files named by the config count by content, not by path),
and the digests of its input artifacts. The
same `run_stage` serves run.py (inputs from the store) and dvc.yaml (inputs
from DVC's output directories).

A stage may also store a part of its work that fewer choices reach than the whole stage
(`StageContext.reuse`, a `StoredPart`): calibrate's statistics do not depend on the method, so a
sweep of methods computes them once. A part is a store entry of its own (`<stage>.<part>`), keyed
like a stage by its code version and what the part names of the stage's config keys (by content)
and inputs; the stage's manifest lists the parts it used, and gc keeps them with it.
"""

from __future__ import annotations

import dataclasses
import errno
import importlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from pipeline.code_version import code_version as closure_version
from pipeline.config import OPTIONAL_FILES, Config, FileRef, select, to_plain
from pipeline.hashing import canonical_json, data_digest, sha256_bytes
from pipeline.params import StoredPart
from pipeline.quiet import native_notices_dropped
from pipeline.resources import ResolvedFile, built_once, resolve_file
from pipeline.stages import Stage
from pipeline.store import Artifact, ArtifactStore, RunLease



class StageFailed(RuntimeError):
    def __init__(self, stage: str, error: BaseException):
        if isinstance(error, MemoryError):
            why = (f"ran out of memory ({error or 'MemoryError'}); lower limits.memory_mb (batches shrink to it, and "
                   "declared sizes over it are refused before allocating) or the batch and image counts of the stage")
        elif isinstance(error, OSError) and error.errno == errno.ENOSPC:
            why = (f"ran out of disk space writing {error.filename or 'its artifacts'}: free space on that disk, or point "
                   "store.url (the store) or TMPDIR (build files) at another")
        elif isinstance(error, OSError) and error.filename:
            why = f"failed: {error.strerror or error} ({error.filename})"
        else:
            why = f"failed: {error}"
        super().__init__(f"stage {stage} {why}")
        self.stage = stage
        self.error = error


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM while a stage ran; the message names the signal and the stage."""


class Display(Protocol):
    def start(self, stage: Stage, key: str) -> None: ...
    def progress(self, stage: Stage, done: int, total: int) -> None: ...
    def finish(self, stage: Stage, result: "StageResult") -> None: ...
    def log(self, stage: Stage, message: str) -> None: ...


# (the part, a function writing it into a directory) -> the directory of the stored part
ReusePart = Callable[[StoredPart, Callable[[Path], None]], Path]


@dataclass
class StageContext:
    """What a stage function may use besides its config and its inputs."""

    stage: str
    progress: Callable[[int, int], None]  # (done, total)
    log: Callable[[str], None]
    reuse: ReusePart | None = None  # the directory of a stored part of this stage, computed when absent
    # the directory of files built from `material` alone (the built-in model), kept across stores in the download cache
    built: Callable[[dict[str, Any], Callable[[Path], None]], Path] | None = None


@dataclass
class StageResult:
    stage: Stage
    artifact: Artifact
    reused: bool
    wall_s: float

    @property
    def key(self) -> str:
        return self.artifact.key

    @property
    def metrics(self) -> dict[str, float]:
        return self.artifact.metrics


class StageParams:
    """The config keys a stage declared, and nothing else.

    Reading an undeclared key raises, so a stage cannot depend on config that
    its key does not cover."""

    def __init__(self, stage: str, values: dict[str, Any], prefix: str = ""):
        self._stage, self._values, self._prefix = stage, values, prefix

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        dotted = f"{self._prefix}{name}"
        if dotted in self._values:
            return self._values[dotted]
        if any(key.startswith(f"{dotted}.") for key in self._values):
            return StageParams(self._stage, self._values, prefix=f"{dotted}.")
        declared_parent = next((key for key in self._values if dotted.startswith(f"{key}.")), None)
        if declared_parent is not None:
            return getattr(self._values[declared_parent], dotted[len(declared_parent) + 1 :])
        raise AttributeError(
            f"stage {self._stage} reads config key {dotted!r} that it does not declare; "
            f"add it to the stage's params in pipeline/stages.py"
        )


def code_version(stage: Stage) -> str:
    """Digest of the stage's source: the import closure of its entry module, with the data files its modules declare."""
    return closure_version(stage.module)


def stage_params(stage: Stage, cfg: Config, cache_dir: Path) -> tuple[StageParams, dict[str, Any]]:
    """The stage's view of the config, and the same subset as key material."""
    values, material = {}, {}
    for dotted in stage.params:
        value = _resolve_files(select(cfg, dotted), dotted, cache_dir)
        values[dotted] = value
        material[dotted] = _key_material(value)
    return StageParams(stage.name, values), material


def _resolve_files(value: Any, dotted: str, cache_dir: Path) -> Any:
    """Replace each FileRef in a config subtree by the local file it names."""
    if isinstance(value, FileRef):
        return resolve_file(value, key=dotted, cache_dir=cache_dir, optional=dotted in OPTIONAL_FILES)
    if dataclasses.is_dataclass(value):
        changes = {
            spec.name: _resolve_files(getattr(value, spec.name), f"{dotted}.{spec.name}", cache_dir)
            for spec in dataclasses.fields(value)
            if isinstance(getattr(value, spec.name), FileRef)
        }
        if changes:
            return _Resolved(value, changes)
    return value


class _Resolved:
    """A config dataclass whose FileRef fields are resolved files."""

    def __init__(self, original: Any, changes: dict[str, Any]):
        self._original, self._changes = original, changes

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._changes[name] if name in self._changes else getattr(self._original, name)


def _key_material(value: Any) -> Any:
    if isinstance(value, ResolvedFile):
        return {"sha256": value.sha256}  # content, not location
    if isinstance(value, _Resolved):
        plain = _key_material(value._original)
        plain.update({name: _key_material(change) for name, change in value._changes.items()})
        return plain
    if dataclasses.is_dataclass(value):
        return {spec.name: _field_material(spec, getattr(value, spec.name)) for spec in dataclasses.fields(value)}
    return to_plain(value)


def _field_material(spec: dataclasses.Field, value: Any) -> Any:
    """A field marked `content` (a data directory) counts by what it holds, not where it is."""
    if spec.metadata.get("content") and value and Path(value).exists():
        return {"sha256": data_digest(Path(value))}
    return _key_material(value)


def material_of(stage: Stage, material: dict[str, Any], dotted: str) -> Any:
    """The key material of config key `dotted`, which the stage declares or lies under one it declares."""
    declared = next((key for key in stage.params if dotted == key or dotted.startswith(f"{key}.")), None)
    if declared is None:
        raise KeyError(f"stage {stage.name} stores a part that depends on config key {dotted!r}, which the stage "
                       "does not declare; add it to the stage's params in pipeline/stages.py")
    value = material[declared]
    for name in dotted[len(declared):].split(".")[1:]:
        value = value[name]
    return value


def part_key(stage: Stage, part: StoredPart, material: dict[str, Any], inputs: dict[str, Artifact]) -> str:
    """A stored part's key: the stage's code version, and the config keys, inputs and choices the part names."""
    unknown = sorted(set(part.inputs) - set(inputs))
    if unknown:
        raise KeyError(f"stage {stage.name} stores a part that reads input(s) {', '.join(unknown)}; its inputs are "
                       f"{', '.join(inputs) or 'none'}")
    return sha256_bytes(canonical_json({
        "part": f"{stage.name}.{part.name}",
        "code": code_version(stage),
        "params": {dotted: material_of(stage, material, dotted) for dotted in sorted(part.params)},
        "choices": dict(part.choices),
        "inputs": {name: inputs[name].digest for name in sorted(part.inputs)},
    }))


def stage_key(stage: Stage, params_material: dict[str, Any], inputs: dict[str, Artifact]) -> str:
    material = {
        "stage": stage.name,
        "code": code_version(stage),
        "params": params_material,
        "inputs": {name: artifact.digest for name, artifact in inputs.items()},
    }
    return sha256_bytes(canonical_json(material))


class Runner:
    def __init__(self, cfg: Config, store: ArtifactStore, display: Display, lease: RunLease):
        """`lease`: the run's hold on what it uses, renewed before each entry is looked up (pipeline/store: RunLease)."""
        self.cfg, self.store, self.display, self.lease = cfg, store, display, lease
        self.cache_dir = Path(cfg.store.cache_dir).expanduser()

    def run_stage(self, stage: Stage, inputs: dict[str, Artifact]) -> StageResult:
        started = time.perf_counter()
        params, material = stage_params(stage, self.cfg, self.cache_dir)
        key = stage_key(stage, material, inputs)
        self.display.start(stage, key)
        self.lease.hold(stage.name, key)
        artifact = self.store.lookup(stage.name, key)
        while self.store.notices:
            self.display.log(stage, "warning: " + self.store.notices.pop(0))
        reused = artifact is not None
        if artifact is None:
            artifact = self._execute(stage, key, params, material, inputs)
        result = StageResult(stage, artifact, reused, time.perf_counter() - started)
        self.display.finish(stage, result)
        return result

    def _execute(self, stage: Stage, key: str, params: StageParams, material: dict, inputs: dict[str, Artifact]) -> Artifact:
        module_name, function_name = stage.entry.split(":")
        function = getattr(importlib.import_module(module_name), function_name)
        parts: dict[str, dict[str, str]] = {}
        context = StageContext(
            stage=stage.name,
            progress=lambda done, total: self.display.progress(stage, done, total),
            log=lambda message: self.display.log(stage, message),
            reuse=lambda part, compute: self._part(stage, part, part_key(stage, part, material, inputs), compute,
                                                   {name: inputs[name] for name in part.inputs}, parts),
            built=lambda built_from, build: built_once(self.cache_dir, {**built_from, "code_version": code_version(stage)}, build),
        )
        build_dir = self.store.new_build_dir()
        started = time.perf_counter()
        try:
            with native_notices_dropped():  # the first stage that runs a graph loads TensorFlow
                metrics = function(params, {name: artifact.directory for name, artifact in inputs.items()}, build_dir, context)
        except BaseException as error:  # Ctrl-C included: nothing half-written stays behind
            self.store.discard(build_dir)
            if isinstance(error, OSError) and error.errno == errno.ENOSPC and not error.filename:
                error = OSError(errno.ENOSPC, error.strerror, str(build_dir))  # a write() names no file: name where it wrote
            if isinstance(error, Exception):
                raise StageFailed(stage.name, error) from error
            if isinstance(error, KeyboardInterrupt) and not isinstance(error, Interrupted):
                raise Interrupted(f"{str(error) or 'interrupted (Ctrl-C)'} while stage {stage.name} ran; nothing of it was "
                                  "stored, the stages before it are in the store and the next run reuses them") from None
            raise
        manifest = {
            "code_version": code_version(stage),
            "params": material,
            "inputs": {name: {"key": artifact.key, "digest": artifact.digest} for name, artifact in inputs.items()},
            "parts": parts,
            "metrics": {name: float(value) for name, value in (metrics or {}).items()},
            "timings": {"wall_s": round(time.perf_counter() - started, 3)},
        }
        return self.store.commit(stage.name, key, build_dir, manifest)

    def _part(self, stage: Stage, part: StoredPart, key: str, compute: Callable[[Path], None], inputs: dict[str, Artifact],
              parts: dict[str, dict[str, str]]) -> Path:
        """The stored part's directory; computed by `compute(directory)` and committed when the store lacks it."""
        name = f"{stage.name}.{part.name}"
        self.lease.hold(name, key)
        artifact = self.store.lookup(name, key)
        while self.store.notices:
            self.display.log(stage, "warning: " + self.store.notices.pop(0))
        if artifact is None:
            build_dir = self.store.new_build_dir()
            started = time.perf_counter()
            try:
                compute(build_dir)
            except BaseException:
                self.store.discard(build_dir)
                raise
            artifact = self.store.commit(name, key, build_dir, {
                "code_version": code_version(stage),
                "inputs": {upstream: {"key": source.key, "digest": source.digest} for upstream, source in inputs.items()},
                "metrics": {}, "timings": {"wall_s": round(time.perf_counter() - started, 3)},
            })
        else:
            self.display.log(stage, f"{part.name}: reused from the store ({name}/{key[:12]}, computed in "
                                    f"{artifact.manifest['timings']['wall_s']:.1f} s)")
        parts[name] = {"key": artifact.key, "digest": artifact.digest}
        return artifact.directory


@dataclass
class RunSummary:
    results: list[StageResult]
    mlflow_run_id: str | None = None
    mlflow_experiment_id: str | None = None
    logged_model_id: str | None = None  # the MLflow logged model of a run that reached codegen and met its limits
    export_dir: Path | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    quality: list[Any] = field(default_factory=list)  # pipeline.quality.Finding: the limits the run's figures broke


def flat_metrics(results: list[StageResult]) -> dict[str, float]:
    """Every metric of the run as '<stage>.<metric>', plus each stage's wall time in this run
    (near zero when reused) and the time its artifact took to compute."""
    flat: dict[str, float] = {}
    for result in results:
        for name, value in result.metrics.items():
            flat[f"{result.stage.name}.{name}"] = value
        flat[f"{result.stage.name}.wall_s"] = round(result.wall_s, 3)
        flat[f"{result.stage.name}.compute_s"] = result.artifact.manifest["timings"]["wall_s"]
    return flat
