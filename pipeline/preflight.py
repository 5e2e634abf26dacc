"""Everything a run needs that can be checked before its first stage is checked there, so a
missing file or an unusable place fails in seconds with the key to fix, not after minutes of
work: the files the config names (resolved and verified by content), the data set, the store,
the export directory and the tracking URI."""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path
from typing import Any, Iterator

from fsspec.implementations.local import LocalFileSystem

from core.backends.capability import refusal
from core.data.datasets import DatasetError, check_source, load_image
from core.frontend.layers import Layer
from core.ir.ops import OPS
from core.frontend.tflite import TfliteError, read_tflite
from core.frontend.tflite_graph import refuse_mixed_activation_types, refuse_unread_operators
from core.limits import MemoryBudget
from core.quantize.schemes.base import scheme_of
from pipeline.config import OPTIONAL_FILES, Config, ConfigError, FileRef, select, to_plain
from pipeline.params import ModelFormat
from pipeline.resources import ResourceError, is_empty, resolve_file
from pipeline.stages import Stage
from pipeline.store import StoreError, open_filesystem
from pipeline.tracking import check_tracking_uri


def preflight(cfg: Config, stages: tuple[Stage, ...]) -> None:
    """Raise what a run of `stages` would meet (ConfigError, ResourceError, StoreError, TrackingError): the files
    and the data set all at once (a user fixes every missing path in one go), then the places it writes."""
    keys = [key for stage in stages for key in stage.params]
    cache_dir = Path(cfg.store.cache_dir).expanduser()
    if cache_dir.exists() and not cache_dir.is_dir():
        raise ConfigError(f"store.cache_dir={cfg.store.cache_dir}: is a file; expected the directory (made if missing) that "
                          "caches downloaded model files by sha256")
    problems = [str(problem) for problem in _input_problems(cfg, keys, cache_dir)]
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} inputs are missing or unusable:\n" + "\n".join(f"  - {problem}" for problem in problems))
    _check_keep_float(cfg)
    _check_store(cfg.store.url, to_plain(cfg.store.options))
    if cfg.export_dir:
        _check_export_dir(cfg.export_dir)
    check_tracking_uri(cfg.tracking_uri)


def _check_keep_float(cfg: Config) -> None:
    """calib.keep_float on a target whose IR keeps no layer in float: refused before import, not at calibrate."""
    kept = list(select(cfg, "calib.keep_float") or [])  # CalibConfig is made from the methods' settings: no attributes to mypy
    if not kept:
        return
    scheme = scheme_of(cfg.target)
    variants = sorted({op.float_variant for op in OPS.values() if op.float_variant})
    refusals = [refusal(scheme.ir_dialect, Layer(name=kept[0], op=variant, inputs=[], output="", nodes=[]), scheme.bits)
                for variant in variants]
    if all(why is not None for why in refusals):
        why = refusals[0]
        raise ConfigError(f"calib.keep_float={kept}: target={cfg.target.name} computes every layer in "
                          f"integers ({why}); keep layers in float on target=tf2ir or an accelerator of its IR, or leave "
                          "calib.keep_float empty")


def _input_problems(cfg: Config, keys: list[str], cache_dir: Path) -> Iterator[Exception]:
    """Each file the config names that cannot be found or read, and the data set's problem."""
    for key, ref in _file_refs(cfg, dict.fromkeys(keys)):
        try:
            resolved = resolve_file(ref, key=key, cache_dir=cache_dir, optional=key in OPTIONAL_FILES)
            if resolved is not None and key == "model.test_image":
                _check_image(key, resolved.path, cfg.model.preprocess.channels)
            if resolved is not None and key == "model.file" and cfg.model.format is ModelFormat.tflite:
                _check_tflite(key, resolved.path, cfg)
        except (ConfigError, ResourceError) as problem:
            yield problem
    if "data" in keys:
        try:
            _check_data(cfg)
        except ConfigError as problem:
            yield problem


def _file_refs(cfg: Config, keys) -> Iterator[tuple[str, FileRef]]:
    for key in keys:
        yield from _refs_in(select(cfg, key), key)


def _refs_in(value: Any, key: str) -> Iterator[tuple[str, FileRef]]:
    if isinstance(value, FileRef):
        if not is_empty(value):
            yield key, value
    elif dataclasses.is_dataclass(value):
        for spec in dataclasses.fields(value):
            yield from _refs_in(getattr(value, spec.name), f"{key}.{spec.name}")


def _check_data(cfg: Config) -> None:
    data = cfg.data
    try:
        check_source(data.kind.value, data.path, (data.calib_split, data.eval_split))
    except DatasetError as error:
        raise ConfigError(f"data.path={data.path}: {error}") from None


def _check_image(key: str, path: Path, channels: int) -> None:
    try:
        load_image(path, channels)
    except DatasetError as error:
        raise ConfigError(f"{key}: {error}") from None


def _check_tflite(key: str, path: Path, cfg: Config) -> None:
    """A .tflite is parsed whole here (a flatbuffer is checked by reading it): damaged, truncated, an operator or
    tensor type the toolchain does not take; a file whose activations are wider than the target's kept as trained."""
    try:
        model = refuse_unread_operators(read_tflite(path, MemoryBudget(cfg.limits.memory_mb)))
        refuse_mixed_activation_types(model)
    except TfliteError as error:
        raise ConfigError(f"{key}.path: {error}") from None
    if select(cfg, "calib.method").value != "qat" or not model.quantized or model.activation_bits == cfg.target.scheme.bits:
        return
    if model.activation_bits > cfg.target.scheme.bits:
        raise ConfigError(f"{key}.path: {path} is a {model.activation_bits}-bit file (TFLite's 16x8 mode: int16 activations), and "
                          f"calib.method=qat keeps its scales, which target={cfg.target.name}'s {cfg.target.scheme.bits}-bit activations "
                          "cannot hold: choose target=tflite_int16x8 to keep them, or another calib.method to quantize the model "
                          f"to {cfg.target.scheme.bits} bits")
    raise ConfigError(f"{key}.path: {path} is an 8-bit file (int8 activations), and calib.method=qat keeps its scales and zero "
                      f"points, which target={cfg.target.name}'s symmetric int16 activations (zero point 0) do not take: choose "
                      f"target=tflite_int8 (or accel_tflite) to keep them, or another calib.method to quantize the model to "
                      f"{cfg.target.scheme.bits} bits")


def _check_store(url: str, options: dict) -> None:
    fs, root = open_filesystem(url, options)
    if not isinstance(fs, LocalFileSystem):
        _check_remote_store(url, fs, root)
        return
    probe = Path(root) / ".tmp" / f".probe-{uuid.uuid4().hex}"
    try:
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise StoreError(f"store.url={url}: cannot write there ({error.strerror or error}); "
                         "point store.url at a directory this user can write") from None


def _check_remote_store(url: str, fs, root: str) -> None:
    """Credentials, endpoint and bucket: an object is written and removed, so a bucket that does not exist or
    cannot be written fails here, in one message, before any stage runs (a listing alone answers 'absent')."""
    probe = f"{root.rstrip('/')}/.tmp/.probe-{uuid.uuid4().hex}"
    try:
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)
    except FileNotFoundError:
        bucket, protocol = root.split("/", 1)[0], url.split("://", 1)[0]
        raise StoreError(f"store.url={url}: the bucket {bucket!r} does not exist at this endpoint; create it (s3: `aws s3 mb "
                         f"{protocol}://{bucket}`, with store.options' endpoint_url) or point store.url at one that exists") from None
    except PermissionError as error:
        raise StoreError(f"store.url={url}: this user may not write there ({error}); check the credentials in the environment "
                         "(AWS_ACCESS_KEY_ID, ...) and the bucket's policy") from None
    except Exception as error:  # each backend raises its own kinds; all mean the same here
        raise StoreError(f"store.url={url}: the store does not answer ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}); "
                         "check the URL, store.options (e.g. endpoint_url) and the credentials in the environment") from None


def _check_export_dir(export_dir: str) -> None:
    path = Path(export_dir).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"export_dir={export_dir}: is a file; expected a directory (made if missing) to copy the artifacts to")
    existing = next(parent for parent in (path, *path.parents) if parent.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"export_dir={export_dir}: cannot write in {existing}; choose a directory this user can write")
