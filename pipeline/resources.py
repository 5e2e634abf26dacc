"""Files the product needs (model graphs, test images): found by path, by
content in the download cache, or fetched once from a pinned URL; and files the
product builds from pinned settings alone (the built-in model), built once.

The cache is keyed by sha256 (`<cache_dir>/sha256/<digest>/<file name>`), so
tests and CI seed it by copying a file there, and a URL is only reached when
the content is not already present. A build is kept under the digest of what it
depends on (`<cache_dir>/built/<digest>/`), with its files' digests: a store of
its own, for every store of this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from filelock import FileLock

from pipeline.config import FileRef
from pipeline.hashing import canonical_json, file_digests, path_digest, sha256_bytes

BUILT_MANIFEST = "manifest.json"


class ResourceError(RuntimeError):
    pass


@dataclass(frozen=True)
class ResolvedFile:
    path: Path
    sha256: str


def is_empty(ref: FileRef) -> bool:
    return not (ref.path or ref.url or ref.sha256)


def cache_entry(cache_dir: Path, sha256: str) -> Path:
    return Path(cache_dir) / "sha256" / sha256


def seed_cache(cache_dir: Path, source: Path) -> Path:
    """Put a local file into the cache under its digest (what tests and CI do)."""
    digest = path_digest(source)
    target = cache_entry(cache_dir, digest) / Path(source).name
    if not target.exists():
        _atomic_copy(Path(source), target)
    return target


def resolve(ref: FileRef, *, key: str, cache_dir: Path) -> ResolvedFile:
    """`key` is the config key of `ref` (e.g. 'model.file'), used in every message."""
    if ref.path:
        return _resolve_path(ref, key)
    if ref.sha256:
        cached = _find_cached(cache_dir, ref.sha256)
        if cached is not None:
            return ResolvedFile(cached, ref.sha256)
    if ref.url:
        return _download(ref, key, cache_dir)
    where = f" or place the file in {cache_entry(cache_dir, ref.sha256)}/" if ref.sha256 else ""
    raise ResourceError(f"{key}: no file given; set {key}.path to a local file{where}")


def resolve_file(ref: FileRef, *, key: str, cache_dir: Path, optional: bool = False) -> ResolvedFile | None:
    """`ref` resolved, or None when it names nothing; an optional file (OPTIONAL_FILES) that names only a
    digest not in the cache is absent too (the stage has a stand-in), not an error."""
    if is_empty(ref) or (optional and not ref.path and not ref.url and _find_cached(cache_dir, ref.sha256) is None):
        return None
    return resolve(ref, key=key, cache_dir=cache_dir)


def _resolve_path(ref: FileRef, key: str) -> ResolvedFile:
    path = Path(ref.path).expanduser()
    if not path.exists():
        raise ResourceError(f"{key}.path={ref.path}: no such file or directory")
    if not (path.is_file() or path.is_dir()):  # /dev/zero, a pipe: hashing it would never end
        raise ResourceError(f"{key}.path={ref.path}: not a regular file or directory")
    digest = path_digest(path)
    if ref.sha256 and digest != ref.sha256:
        raise ResourceError(
            f"{key}.path={ref.path}: sha256 {digest} differs from the pinned {key}.sha256={ref.sha256}; "
            f"it is not the file the config names (set {key}.sha256=null to accept it)"
        )
    return ResolvedFile(path, digest)


def _find_cached(cache_dir: Path, sha256: str) -> Path | None:
    entry = cache_entry(cache_dir, sha256)
    if not entry.is_dir():
        return None
    for candidate in sorted(entry.iterdir()):
        if candidate.is_file() and path_digest(candidate) == sha256:
            return candidate
    return None


def _download(ref: FileRef, key: str, cache_dir: Path) -> ResolvedFile:
    import fsspec

    if not ref.sha256:
        raise ResourceError(f"{key}.url is set without {key}.sha256; pin the content so downloads are verified")
    name = Path(ref.url.split("?")[0]).name or "download"
    target = cache_entry(cache_dir, ref.sha256) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{name}.{uuid.uuid4().hex}.part")
    try:
        with fsspec.open(ref.url, "rb") as remote, open(partial, "wb") as local:
            shutil.copyfileobj(remote, local)
    except Exception as error:  # any transport failure reads the same to the user
        partial.unlink(missing_ok=True)
        raise ResourceError(
            f"{key}: could not download {ref.url} ({type(error).__name__}: {error}). "
            f"If this machine is offline, set {key}.path to a local copy, or put the file in {target.parent}/"
        ) from None
    digest = path_digest(partial)
    if digest != ref.sha256:
        partial.unlink(missing_ok=True)
        raise ResourceError(f"{key}: {ref.url} has sha256 {digest}, expected {ref.sha256}; refusing it")
    os.replace(partial, target)
    return ResolvedFile(target, digest)


def _atomic_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    shutil.copyfile(source, partial)
    os.replace(partial, target)


def built_once(cache_dir: Path, material: dict[str, Any], build: Callable[[Path], None]) -> Path:
    """The directory of the files `build(directory)` writes, for `material` (JSON: everything the build depends on, its
    code included): built when the cache has no entry for it, or an entry whose files differ from their recorded
    digests (a damaged entry is built again); committed whole by a rename, so a crash leaves no half-written entry.
    Processes of one machine that want the same entry at once (a parallel sweep on a new cache) build it once: the
    others wait on its lock and read it. A cache that cannot be written (read-only) only costs the rebuild."""
    entry = Path(cache_dir) / "built" / sha256_bytes(canonical_json(material))
    if _intact(entry, material):
        return entry / "files"
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(entry) + ".lock")
        lock.acquire()
    except OSError:
        return _build_into(Path(tempfile.mkdtemp(prefix="built-")), material, build) / "files"
    try:
        if not _intact(entry, material):  # not committed while this process waited
            _commit(_build_into(Path(tempfile.mkdtemp(prefix=f".{entry.name[:12]}.", dir=entry.parent)), material, build), entry)
    finally:
        lock.release()
    return entry / "files"


def _build_into(scratch: Path, material: dict[str, Any], build: Callable[[Path], None]) -> Path:
    """`scratch` with the build's files and their manifest; removed if the build fails or is interrupted."""
    try:
        build(scratch / "files")
        (scratch / BUILT_MANIFEST).write_text(json.dumps({"material": material, "files": file_digests(scratch / "files")}, sort_keys=True))
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return scratch


def _commit(scratch: Path, entry: Path) -> None:
    """`scratch` renamed to `entry`, a damaged entry there removed first (a rename cannot replace a directory of files)."""
    try:
        if entry.exists():
            shutil.rmtree(entry)
        os.rename(scratch, entry)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _intact(entry: Path, material: dict[str, Any]) -> bool:
    try:
        recorded = json.loads((entry / BUILT_MANIFEST).read_text())
        return recorded["material"] == json.loads(canonical_json(material)) and recorded["files"] == file_digests(entry / "files")
    except (OSError, ValueError, KeyError, TypeError):
        return False
