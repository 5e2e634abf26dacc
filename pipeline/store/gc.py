"""Garbage collection of the artifact store: `python -m pipeline.store gc [--dry-run] [--keep-runs N]`.

Kept: the entries of the runs in progress (each holds what it uses by its live run record, pipeline/store: RunLease,
whatever N is), the entries named by the newest N run records (run.py and `dvc repro` both record the
entries they used), the entries DVC's lock points at (each `dvc_artifacts/<stage>` output of
dvc.lock, read through DVC's cache, else the workspace's copy), and every entry a kept entry
was computed from. Removed: every other entry, the run records beyond the newest N, damaged
entries moved aside to .quarantine/, and the build directories of killed runs.

A DVC experiment's outputs stay in DVC's cache (`dvc exp apply` restores them); the store only
serves recomputation, so an entry gc removed is computed again when a run asks for it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from dvc.repo import Repo

from pipeline.hashing import MANIFEST
from pipeline.store import QUARANTINE_DIR, ArtifactStore, holds_entries, read_manifest

DVC_LOCK = "dvc.lock"
DVC_OUTPUTS = "dvc_artifacts"
DEFAULT_KEEP_RUNS = 10

Entry = tuple[str, str]  # (stage, key)


@dataclass
class GcPlan:
    keep: dict[Entry, str] = field(default_factory=dict)  # entry -> why it is kept
    remove: list[Entry] = field(default_factory=list)
    old_records: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)  # in the store
    quarantined_here: list[Path] = field(default_factory=list)  # in this machine's cache of a remote store
    live_runs: int = 0  # runs in progress, whose entries are kept

    @property
    def damaged(self) -> int:
        return len(self.quarantined) + len(self.quarantined_here)

    def bytes_freed(self, store: ArtifactStore) -> int:
        return sum(_entry_bytes(store, stage, key) for stage, key in self.remove)


def dvc_lock_entries(project: Path) -> dict[Entry, str]:
    """The store entries dvc.lock's stage outputs hold: their manifest, found in DVC's cache by the
    output's hash (the lock, not the workspace, is what a checkout restores), else in the workspace."""
    lock_path = project / DVC_LOCK
    if not lock_path.exists():
        return {}
    lock = yaml.safe_load(lock_path.read_text()) or {}
    entries = {}
    for stage in (lock.get("stages") or {}).values():
        for out in stage.get("outs") or []:
            if not str(out.get("path", "")).startswith(f"{DVC_OUTPUTS}/"):
                continue
            manifest = _manifest_in_dvc_cache(project, str(out.get("md5", ""))) or read_manifest(project / out["path"] / MANIFEST)
            if manifest is not None:
                entries[(manifest["stage"], manifest["key"])] = f"{DVC_LOCK} ({out['path']})"
    return entries


def _manifest_in_dvc_cache(project: Path, directory_hash: str) -> dict[str, Any] | None:
    if not directory_hash.endswith(".dir"):
        return None
    cache = _dvc_cache(project)
    try:
        listing = json.loads((cache / directory_hash[:2] / directory_hash[2:]).read_text())
        entry = next(item for item in listing if item.get("relpath") == MANIFEST)
        return read_manifest(cache / entry["md5"][:2] / entry["md5"][2:])
    except (OSError, ValueError, StopIteration, KeyError, TypeError):
        return None


def _dvc_cache(project: Path) -> Path:
    """DVC's own answer: cache.dir may be configured elsewhere."""
    with Repo(str(project)) as repo:
        return Path(repo.cache.local.path)


def plan_gc(store: ArtifactStore, project: Path, keep_runs: int = DEFAULT_KEEP_RUNS) -> GcPlan:
    plan = GcPlan()
    records = store.run_records()
    live = [(path, record) for path, record in records if holds_entries(record)]
    finished = [(path, record) for path, record in records if not holds_entries(record)]
    for path, record in live:  # whatever keep_runs says: a run in progress reads and writes these now
        for stage, key in record["stages"].items():
            plan.keep.setdefault((stage, key), f"run in progress {Path(path).name}")
    plan.live_runs = len(live)
    for path, record in finished[:keep_runs]:
        for stage, key in record["stages"].items():
            plan.keep.setdefault((stage, key), f"run record {Path(path).name}")
    plan.old_records = [path for path, _ in finished[keep_runs:]]
    for entry, why in dvc_lock_entries(project).items():
        plan.keep.setdefault(entry, why)
    _add_inputs(store, plan.keep)
    present = [(stage, key) for stage in store.stages_present() for key in store.entries(stage)]
    plan.remove = [entry for entry in present if entry not in plan.keep]
    quarantine = f"{store.root}/{QUARANTINE_DIR}"
    plan.quarantined = sorted(store.fs.ls(quarantine, detail=False)) if store.fs.exists(quarantine) else []
    # a remote store's damaged local copies are moved aside in this machine's cache of it (ArtifactStore._fetch)
    local = store.local_cache / QUARANTINE_DIR
    plan.quarantined_here = sorted(local.iterdir()) if not store.is_local and local.is_dir() else []
    return plan


def _add_inputs(store: ArtifactStore, keep: dict[Entry, str]) -> None:
    """Each kept entry's inputs and stored parts, transitively: a run that reuses a stage also needs
    what it was computed from, and its parts serve the stage's next configuration."""
    pending = list(keep)
    while pending:
        stage, key = pending.pop()
        manifest = store.manifest(stage, key) or {}
        for upstream, info in [*(manifest.get("inputs") or {}).items(), *(manifest.get("parts") or {}).items()]:
            entry = (upstream, info.get("key", ""))
            if entry not in keep:
                keep[entry] = f"input of {stage}/{key[:12]}"
                pending.append(entry)


def run_gc(store: ArtifactStore, plan: GcPlan) -> None:
    for stage, key in plan.remove:
        store.fs.rm(f"{store.root}/{stage}/{key}", recursive=True)
    for path in [*plan.old_records, *plan.quarantined]:
        store.fs.rm(path, recursive=True)
    for local in plan.quarantined_here:
        shutil.rmtree(local, ignore_errors=True)
    store.collect_orphans()


def _entry_bytes(store: ArtifactStore, stage: str, key: str) -> int:
    """What removing the entry frees: on a local store, files no one else links to (DVC's cache
    shares dvc_artifacts' files by hard link); elsewhere, its size."""
    path = f"{store.root}/{stage}/{key}"
    if not store.is_local:
        return int(store.fs.du(path))
    return sum(stat.st_size for stat in (os.stat(file) for file in Path(path).rglob("*") if file.is_file()) if stat.st_nlink == 1)
