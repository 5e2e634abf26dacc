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

Each run records the entries it used in `<root>/.runs/<time>-<id>.json`, written when it starts and
rewritten, live, before each entry it looks up (RunLease); `python -m pipeline.store gc`
(pipeline/store/gc.py) keeps what the runs in progress, the newest runs and DVC's lock
reference and removes the rest.

A build directory is held by an exclusive lock on `<uuid>.lock` beside it for as long as
its process lives, so the orphans of killed runs (no process holds their lock) are
collected when a store is opened, while the builds of live concurrent runs are left alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from pipeline.hashing import MANIFEST, file_digests, tree_digest
from pipeline.liveness import abandoned, this_process

TMP_DIR = ".tmp"
RUNS_DIR = ".runs"  # one small JSON per run: the (stage, key) entries it used
QUARANTINE_DIR = ".quarantine"  # damaged entries, moved aside (never served, never deleted unseen)
LOCK_SUFFIX = ".lock"


class StoreError(RuntimeError):
    pass


# protocols whose fsspec backend this project declares as an installable extra
EXTRAS = {"s3": ("s3fs", "make setup-s3"), "s3a": ("s3fs", "make setup-s3")}


def open_filesystem(url: str, options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """fsspec's filesystem and root for `url` with `options` (store.options), or a StoreError that says
    which package the protocol needs and how to install it."""
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    try:
        return fsspec.core.url_to_fs(url, **(options or {}))
    except ImportError as error:
        package, command = EXTRAS.get(protocol, (None, None))
        if command:
            hint = f"install the project's `{protocol}` extra: `{command}` (or `.venv/bin/pip install -r requirements-{protocol.rstrip('a')}.lock`)"
        else:
            hint = f"install the fsspec backend fsspec names for it ({error})"
        needs = f"{package}, which is not installed" if package else "a package that is not installed"
        raise StoreError(f"store.url={url}: the {protocol}:// protocol needs {needs}; {hint}") from None
    except ValueError as error:
        if "protocol" in str(error).lower():
            raise StoreError(f"store.url={url}: fsspec knows no protocol {protocol!r} ({error}); use a directory or an fsspec URL "
                             "such as s3://bucket/prefix") from None
        raise
    except TypeError as error:  # an option the filesystem does not take
        raise StoreError(f"store.options={options}: {protocol}:// does not take these options ({error})") from None


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
    def __init__(self, url: str, local_cache: Path | None = None, options: dict[str, Any] | None = None):
        self.url = url
        self.fs, self.root = open_filesystem(url, options)
        self.is_local = isinstance(self.fs, LocalFileSystem)
        self.local_cache = Path(local_cache or tempfile.gettempdir()) / "store"
        self.notices: list[str] = []  # what the store healed (quarantined, collected), for the runner to say
        self._claims: dict[Path, int] = {}  # build directory -> the descriptor holding its lock

    # --- reading -------------------------------------------------------------
    def lookup(self, stage: str, key: str) -> Artifact | None:
        """The intact entry for (stage, key), or None. A damaged entry (no or an unreadable
        manifest, files that differ from it) is moved to .quarantine/ and reported in
        `quarantined`: the stage runs again and the store heals."""
        if self.is_local:
            directory = Path(self.root) / stage / key
            if not directory.exists():
                return None
            return self._intact_or_quarantined(Artifact(stage, key, directory, read_manifest(directory / MANIFEST)))
        remote = f"{self.root}/{stage}/{key}"
        if not self.fs.exists(f"{remote}/{MANIFEST}"):
            return None
        return self._intact_or_quarantined(self._fetch(stage, key, remote))

    def _fetch(self, stage: str, key: str, remote: str) -> Artifact:
        local = self.local_cache / stage / key
        if read_manifest(local / MANIFEST) is None:
            if local.exists():
                self._quarantine(local, "a damaged local copy")
            partial = self.new_build_dir(self.local_cache / TMP_DIR)
            self.fs.get(f"{remote}/", str(partial), recursive=True)
            _rename_or_discard(partial, local)
            self._release(partial)
        return Artifact(stage, key, local, read_manifest(local / MANIFEST))

    def _intact_or_quarantined(self, artifact: Artifact) -> Artifact | None:
        if artifact.manifest is None:
            why = "its manifest is missing or unreadable"
        elif changed_files(artifact.directory, artifact.manifest):
            why = f"{', '.join(changed_files(artifact.directory, artifact.manifest))} differ from its manifest"
        else:
            return artifact
        self._quarantine(artifact.directory, why)
        return None

    def _quarantine(self, directory: Path, why: str) -> None:
        aside = directory.parent.parent / QUARANTINE_DIR / f"{directory.parent.name}-{directory.name}-{uuid.uuid4().hex[:8]}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        os.rename(directory, aside)
        self.notices.append(f"store entry {directory} was damaged ({why}): moved to {aside}, computing it again")

    def _checked(self, artifact: Artifact) -> Artifact:
        if changed_files(artifact.directory, artifact.manifest):
            raise StoreError(f"store entry {artifact.directory} differs from its manifest right after it was written; "
                             "is another process writing into the store directory?")
        return artifact

    # --- writing -------------------------------------------------------------
    @property
    def build_base(self) -> Path:
        return Path(self.root) / TMP_DIR if self.is_local else self.local_cache / TMP_DIR

    def new_build_dir(self, base: Path | None = None) -> Path:
        """A private, empty directory for a stage to write into, locked while this process lives."""
        directory = (base or self.build_base) / uuid.uuid4().hex
        directory.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(_lock_of(directory), os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # before the directory exists: a collector never sees it unlocked
        directory.mkdir()
        self._claims[directory] = descriptor
        return directory

    def _release(self, directory: Path) -> None:
        descriptor = self._claims.pop(directory, None)
        if descriptor is not None:
            _lock_of(directory).unlink(missing_ok=True)
            os.close(descriptor)

    def collect_orphans(self) -> int:
        """Remove the build directories no live process holds (left by killed runs); how many."""
        collected = 0
        for base in {self.build_base, self.local_cache / TMP_DIR}:
            if not base.is_dir():
                continue
            for path in sorted(base.iterdir()):
                if path.suffix != LOCK_SUFFIX:
                    collected += _remove_if_unclaimed(path)
                elif not path.with_suffix("").exists():  # a lock whose directory is gone (killed mid-way)
                    _remove_if_unclaimed(path.with_suffix(""))
        if collected:
            self.notices.append(f"removed {collected} unfinished build director{'y' if collected == 1 else 'ies'} "
                                f"left in {self.build_base} by runs that were killed")
        return collected

    def commit(self, stage: str, key: str, build_dir: Path, manifest: dict[str, Any]) -> Artifact:
        """Seal `build_dir` as the entry for (stage, key) and return the entry that won."""
        files = file_digests(build_dir)
        manifest = {**manifest, "stage": stage, "key": key, "files": files, "digest": tree_digest(files)}
        _write_json(build_dir / MANIFEST, manifest)
        if self.is_local:
            final = Path(self.root) / stage / key
            final.parent.mkdir(parents=True, exist_ok=True)
            _rename_or_discard(build_dir, final)
            self._release(build_dir)
            return self._checked(Artifact(stage, key, final, read_manifest(final / MANIFEST)))
        remote = f"{self.root}/{stage}/{key}"
        for name in files:  # the manifest goes last: it is the commit marker
            self.fs.put_file(str(build_dir / name), f"{remote}/{name}")
        self.fs.put_file(str(build_dir / MANIFEST), f"{remote}/{MANIFEST}")
        shutil.rmtree(build_dir, ignore_errors=True)
        self._release(build_dir)
        return self.lookup(stage, key)

    def discard(self, build_dir: Path) -> None:
        shutil.rmtree(build_dir, ignore_errors=True)
        self._release(build_dir)

    # --- what runs used, for garbage collection --------------------------------
    def record_run(self, stages: dict[str, str], origin: str, path: str | None = None, live: bool = False) -> str:
        """Note that a run used these entries ({stage: key}); the record's path. `live`: the run goes on, and `path` is
        its record, rewritten as it holds more (RunLease): gc keeps what a live run holds whatever --keep-runs says."""
        now = time.time()  # names sort by time, to the microsecond
        name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))}.{int(now * 1e6) % 1_000_000:06d}Z-{uuid.uuid4().hex[:8]}.json"
        fields: dict[str, Any] = {"time": now, "origin": origin, "stages": stages}
        if live:
            fields.update(live=True, **this_process())
        record = json.dumps(fields, indent=1, sort_keys=True) + "\n"
        path = path or f"{self.root}/{RUNS_DIR}/{name}"
        if self.is_local:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            partial = Path(path).with_suffix(".partial")
            try:
                partial.write_text(record)
                os.replace(partial, path)
            except OSError:  # a full disk: no partial record left behind
                partial.unlink(missing_ok=True)
                raise
        else:
            self.fs.pipe_file(path, record.encode())
        return path

    def remove_record(self, path: str) -> None:
        self.fs.rm(path)

    def run_records(self) -> list[tuple[str, dict[str, Any]]]:
        """(path, record) of every readable run record, newest first."""
        base = f"{self.root}/{RUNS_DIR}"
        if not self.fs.exists(base):
            return []
        records = []
        for path in sorted(self.fs.ls(base, detail=False), reverse=True):
            try:
                record = json.loads(self.fs.cat_file(path))
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and isinstance(record.get("stages"), dict):
                records.append((path, record))
        return records

    def manifest(self, stage: str, key: str) -> dict[str, Any] | None:
        """An entry's manifest as stored (not verified against its files), or None."""
        try:
            return manifest_from(self.fs.cat_file(f"{self.root}/{stage}/{key}/{MANIFEST}"))
        except OSError:
            return None

    def stages_present(self) -> list[str]:
        if not self.fs.exists(self.root):
            return []
        return sorted(Path(path).name for path in self.fs.ls(self.root, detail=False)
                      if not Path(path).name.startswith(".") and self.fs.isdir(path))

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
        if read_manifest(final / MANIFEST) is None:
            raise
        shutil.rmtree(partial, ignore_errors=True)  # a concurrent writer committed the same key first


def _lock_of(directory: Path) -> Path:
    return directory.with_name(directory.name + LOCK_SUFFIX)


def _remove_if_unclaimed(directory: Path) -> bool:
    lock = _lock_of(directory)
    try:
        descriptor = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return False  # a live process is building in it
    shutil.rmtree(directory, ignore_errors=True)
    lock.unlink(missing_ok=True)
    os.close(descriptor)
    return True


def changed_files(directory: Path, manifest: dict[str, Any]) -> list[str]:
    """The files (relative names) that are not as the manifest records them: edited, added or gone."""
    actual, recorded = file_digests(directory), manifest.get("files") or {}
    return sorted(name for name in set(actual) | set(recorded) if actual.get(name) != recorded.get(name))


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest, or None where there is none that could be a commit marker (absent, empty,
    cut short, not an object)."""
    try:
        return manifest_from(Path(path).read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        return None


def manifest_from(content: bytes) -> dict[str, Any] | None:
    try:
        manifest = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None
    return manifest if isinstance(manifest, dict) and "files" in manifest else None


def _write_json(path: Path, data: Any) -> None:
    Path(path).write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


# a live record of another machine's run, or of one whose process this machine cannot see, counts as live this long
# after it was last written (a stage of hours renews it only when it ends)
LEASE_SECONDS = 7 * 24 * 3600


def holds_entries(record: dict[str, Any], now: float | None = None) -> bool:
    """Whether `record` is a run that still goes on (RunLease): its process alive on this machine, or, written on another,
    renewed within LEASE_SECONDS. A killed run's record is an ordinary record of what it used."""
    if not record.get("live"):
        return False
    if record.get("host") == this_process()["host"]:
        return not abandoned(record)
    return (now or time.time()) - float(record.get("time") or 0) < LEASE_SECONDS


class RunLease:
    """A run's hold on the store entries it uses: its run record, written when the run starts and rewritten before each
    entry is looked up or computed (so `pipeline.store gc` never removes what a live run reads or has just written),
    made an ordinary record of what the run used when it ends (none, if it used nothing)."""

    def __init__(self, store: ArtifactStore, origin: str):
        self.store, self.origin, self.held = store, origin, {}
        self.path: str | None = None
        self._write({}, live=True)

    def hold(self, name: str, key: str) -> None:
        if self.held.get(name) != key:
            self.held[name] = key
            self._write(dict(self.held), live=True)

    def close(self, used: dict[str, str]) -> None:
        """The record of the entries the run used ({stage: key}), no longer live."""
        if used:
            self._write(used, live=False)
        elif self.path is not None:
            self.store.remove_record(self.path)

    def _write(self, stages: dict[str, str], live: bool) -> None:
        """The record written; where the store cannot take it (a full disk), the run goes on without the hold: the stage's
        own write there then fails, naming the disk, and a run without a record was never one gc keeps anyway."""
        try:
            self.path = self.store.record_run(stages, self.origin, path=self.path, live=live)
        except OSError:
            pass
