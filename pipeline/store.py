"""The content-addressed artifact store.

One directory per (stage, key): `<root>/<stage>/<key>/` holding the stage's
files and a `manifest.json` (key, inputs, config subset, file digests, metrics,
timings). An entry exists exactly when its manifest does.

Nothing is ever half-written. On a local filesystem a stage builds its output
in `<root>/.tmp/<uuid>/` and the finished directory is renamed into place in
one `rename`: a crash or Ctrl-C leaves at most an orphan under `.tmp/`, never
an entry. When two processes build the same key at once the second rename
fails, the loser discards its copy and both use the winner's entry. On any
other fsspec filesystem (s3://, gs://, memory://) the files are uploaded first
and the manifest last, so the manifest is the commit marker, and entries are
fetched into a local cache directory before a stage reads them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from pipeline.hashing import MANIFEST, file_digests, tree_digest

TMP_DIR = ".tmp"
QUARANTINE_DIR = ".quarantine"  # damaged entries, moved aside (never served, never deleted unseen)


class StoreError(RuntimeError):
    pass


@dataclass(frozen=True)
class Artifact:
    stage: str
    key: str
    directory: Path  # a local directory holding the files
    manifest: dict[str, Any]

    @property
    def digest(self) -> str:
        return self.manifest["digest"]

    @property
    def metrics(self) -> dict[str, float]:
        return self.manifest.get("metrics", {})


class ArtifactStore:
    def __init__(self, url: str, local_cache: Path | None = None):
        self.url = url
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.is_local = isinstance(self.fs, LocalFileSystem)
        self.local_cache = Path(local_cache or tempfile.gettempdir()) / "store"
        self.quarantined: list[str] = []  # what lookup moved aside, for the runner to say

    # --- reading -------------------------------------------------------------
    def lookup(self, stage: str, key: str) -> Artifact | None:
        """The intact entry for (stage, key), or None. A damaged entry (no or an unreadable
        manifest, files that differ from it) is moved to .quarantine/ and reported in
        `quarantined`: the stage runs again and the store heals."""
        if self.is_local:
            directory = Path(self.root) / stage / key
            if not directory.exists():
                return None
            return self._intact_or_quarantined(Artifact(stage, key, directory, _read_manifest(directory / MANIFEST)))
        remote = f"{self.root}/{stage}/{key}"
        if not self.fs.exists(f"{remote}/{MANIFEST}"):
            return None
        return self._intact_or_quarantined(self._fetch(stage, key, remote))

    def _fetch(self, stage: str, key: str, remote: str) -> Artifact:
        local = self.local_cache / stage / key
        if _read_manifest(local / MANIFEST) is None:
            if local.exists():
                self._quarantine(local, "a damaged local copy")
            partial = self.local_cache / TMP_DIR / uuid.uuid4().hex
            partial.mkdir(parents=True)
            self.fs.get(f"{remote}/", str(partial), recursive=True)
            _rename_or_discard(partial, local)
        return Artifact(stage, key, local, _read_manifest(local / MANIFEST))

    def _intact_or_quarantined(self, artifact: Artifact) -> Artifact | None:
        if artifact.manifest is None:
            why = "its manifest is missing or unreadable"
        elif file_digests(artifact.directory) != artifact.manifest.get("files"):
            why = "its files differ from its manifest"
        else:
            return artifact
        self._quarantine(artifact.directory, why)
        return None

    def _quarantine(self, directory: Path, why: str) -> None:
        aside = directory.parent.parent / QUARANTINE_DIR / f"{directory.parent.name}-{directory.name}-{uuid.uuid4().hex[:8]}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        os.rename(directory, aside)
        self.quarantined.append(f"store entry {directory} was damaged ({why}): moved to {aside}, computing it again")

    def _checked(self, artifact: Artifact) -> Artifact:
        actual = file_digests(artifact.directory)
        if actual != artifact.manifest["files"]:
            raise StoreError(f"store entry {artifact.directory} differs from its manifest right after it was written; "
                             "is another process writing into the store directory?")
        return artifact

    # --- writing -------------------------------------------------------------
    def new_build_dir(self) -> Path:
        """A private, empty directory for a stage to write into."""
        base = Path(self.root) / TMP_DIR if self.is_local else self.local_cache / TMP_DIR
        directory = base / uuid.uuid4().hex
        directory.mkdir(parents=True)
        return directory

    def commit(self, stage: str, key: str, build_dir: Path, manifest: dict[str, Any]) -> Artifact:
        """Seal `build_dir` as the entry for (stage, key) and return the entry that won."""
        files = file_digests(build_dir)
        manifest = {**manifest, "stage": stage, "key": key, "files": files, "digest": tree_digest(files)}
        _write_json(build_dir / MANIFEST, manifest)
        if self.is_local:
            final = Path(self.root) / stage / key
            final.parent.mkdir(parents=True, exist_ok=True)
            _rename_or_discard(build_dir, final)
            return self._checked(Artifact(stage, key, final, _read_manifest(final / MANIFEST)))
        remote = f"{self.root}/{stage}/{key}"
        for name in files:  # the manifest goes last: it is the commit marker
            self.fs.put_file(str(build_dir / name), f"{remote}/{name}")
        self.fs.put_file(str(build_dir / MANIFEST), f"{remote}/{MANIFEST}")
        shutil.rmtree(build_dir, ignore_errors=True)
        return self.lookup(stage, key)

    def discard(self, build_dir: Path) -> None:
        shutil.rmtree(build_dir, ignore_errors=True)

    def entries(self, stage: str) -> list[str]:
        """Keys present for a stage (for reports and tests)."""
        base = f"{self.root}/{stage}"
        if not self.fs.exists(base):
            return []
        return sorted(
            Path(path).name for path in self.fs.ls(base, detail=False) if self.fs.exists(f"{path}/{MANIFEST}")
        )


def _rename_or_discard(partial: Path, final: Path) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(partial, final)
    except OSError:
        if _read_manifest(final / MANIFEST) is None:
            raise
        shutil.rmtree(partial, ignore_errors=True)  # a concurrent writer committed the same key first


def _read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest, or None where there is none that could be a commit marker (absent, empty,
    cut short, not an object)."""
    try:
        manifest = json.loads(Path(path).read_text())
    except (FileNotFoundError, NotADirectoryError, ValueError, UnicodeDecodeError):
        return None
    return manifest if isinstance(manifest, dict) and "files" in manifest else None


def _write_json(path: Path, data: Any) -> None:
    Path(path).write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
