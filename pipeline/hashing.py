"""Content digests: the store's keys and every artifact's identity."""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator

MANIFEST = "manifest.json"
_CHUNK = 1 << 20
_DATA_DIGESTS: ContextVar[dict[Path, str] | None] = ContextVar("data_digests", default=None)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()


def file_digests(directory: Path) -> dict[str, str]:
    """relative path -> sha256 for every file below `directory` but the manifest."""
    directory = Path(directory)
    return {
        path.relative_to(directory).as_posix(): sha256_file(path)
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.relative_to(directory).as_posix() != MANIFEST
    }


def tree_digest(files: dict[str, str]) -> str:
    """One digest for a set of files: equal exactly when names and contents are."""
    return sha256_bytes(canonical_json(sorted(files.items())))


def path_digest(path: Path) -> str:
    path = Path(path)
    return sha256_file(path) if path.is_file() else tree_digest(file_digests(path))


@contextmanager
def one_reading_of_data() -> Iterator[None]:
    """Within it, `data_digest` reads each data set once: a run's stage keys and its tracking share one digest
    (hashing CIFAR-10 takes about half a second, and three stages and the tracking each asked)."""
    token = _DATA_DIGESTS.set({})
    try:
        yield
    finally:
        _DATA_DIGESTS.reset(token)


def data_digest(path: Path) -> str:
    """`path_digest` of a data set, remembered for the enclosing `one_reading_of_data` (a run's data does not
    change under it; outside one, read every time)."""
    memo, path = _DATA_DIGESTS.get(), Path(path).resolve()
    if memo is None:
        return path_digest(path)
    if path not in memo:
        memo[path] = path_digest(path)
    return memo[path]
