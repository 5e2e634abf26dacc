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

from core.data.datasets import DatasetError, check_source, load_image
from core.frontend.tflite import TfliteError, read_tflite
from core.limits import MemoryBudget
from pipeline.config import Config, ConfigError, FileRef, select, to_plain
from pipeline.params import ModelFormat
from pipeline.resources import is_empty, resolve
from pipeline.stages import Stage
from pipeline.store import StoreError, open_filesystem
from pipeline.tracking import check_tracking_uri


def preflight(cfg: Config, stages: tuple[Stage, ...]) -> None:
    """Raise the first problem a run of `stages` would meet (ConfigError, ResourceError, StoreError, TrackingError)."""
    keys = [key for stage in stages for key in stage.params]
    cache_dir = Path(cfg.store.cache_dir).expanduser()
    if cache_dir.exists() and not cache_dir.is_dir():
        raise ConfigError(f"store.cache_dir={cfg.store.cache_dir}: is a file; expected the directory (made if missing) that "
                          "caches downloaded model files by sha256")
    for key, ref in _file_refs(cfg, dict.fromkeys(keys)):
        resolved = resolve(ref, key=key, cache_dir=cache_dir)
        if key == "model.test_image":
            _check_image(key, resolved.path, cfg.model.preprocess.channels)
        if key == "model.file" and cfg.model.format is ModelFormat.tflite:
            _check_tflite(key, resolved.path, cfg.limits.memory_mb)
    if "data" in keys:
        _check_data(cfg)
    _check_store(cfg.store.url, to_plain(cfg.store.options))
    if cfg.export_dir:
        _check_export_dir(cfg.export_dir)
    check_tracking_uri(cfg.tracking_uri)


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


def _check_tflite(key: str, path: Path, memory_mb: int) -> None:
    """A .tflite is parsed whole here (a flatbuffer is checked by reading it): damaged, truncated, an operator or
    tensor type the toolchain does not take."""
    try:
        read_tflite(path, MemoryBudget(memory_mb))
    except TfliteError as error:
        raise ConfigError(f"{key}.path: {error}") from None


def _check_store(url: str, options: dict) -> None:
    fs, root = open_filesystem(url, options)
    if not isinstance(fs, LocalFileSystem):
        try:
            fs.exists(root)  # credentials, endpoint, bucket: a bad one fails here, before any stage runs
        except Exception as error:  # each backend raises its own kinds; all mean the same here
            raise StoreError(f"store.url={url}: the store does not answer ({type(error).__name__}: {error}); check the URL, "
                             "store.options (e.g. endpoint_url) and the credentials in the environment") from None
        return
    probe = Path(root) / ".tmp" / f".probe-{uuid.uuid4().hex}"
    try:
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise StoreError(f"store.url={url}: cannot write there ({error.strerror or error}); "
                         "point store.url at a directory this user can write") from None


def _check_export_dir(export_dir: str) -> None:
    path = Path(export_dir).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"export_dir={export_dir}: is a file; expected a directory (made if missing) to copy the artifacts to")
    existing = next(parent for parent in (path, *path.parents) if parent.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"export_dir={export_dir}: cannot write in {existing}; choose a directory this user can write")
