"""The content-addressed store: atomic commits, concurrent writers, any fsspec URL."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.hashing import data_digest, file_digests, one_reading_of_data, path_digest, tree_digest
from conftest import PROJECT_ROOT, tracking_override
from pipeline.store import LEASE_SECONDS, ArtifactStore, RunLease, holds_entries
from pipeline.runner import material_of
from pipeline.stages import stage_named
from pipeline.store.gc import plan_gc, run_gc


def _build(store: ArtifactStore, payload: bytes) -> Path:
    build_dir = store.new_build_dir()
    (build_dir / "data.bin").write_bytes(payload)
    (build_dir / "nested").mkdir()
    (build_dir / "nested" / "more.txt").write_text("x")
    return build_dir


def test_commit_then_lookup_round_trip(tmp_path):
    store = ArtifactStore(str(tmp_path / "store"))
    assert store.lookup("import", "k1") is None
    artifact = store.commit("import", "k1", _build(store, b"abc"), {"metrics": {"m": 1.0}})
    again = store.lookup("import", "k1")
    assert again.directory == artifact.directory and again.digest == artifact.digest
    assert again.metrics == {"m": 1.0}
    assert artifact.digest == tree_digest(file_digests(artifact.directory))
    assert store.entries("import") == ["k1"]


def test_a_build_that_never_commits_leaves_no_entry(tmp_path):
    store = ArtifactStore(str(tmp_path / "store"))
    _build(store, b"half")  # a stage that died before commit
    assert store.lookup("import", "k1") is None and store.entries("import") == []


DAMAGE = {
    "tampered file": lambda entry: (entry / "data.bin").write_bytes(b"tampered"),
    "extra file": lambda entry: (entry / "planted.py").write_text("import os"),
    "empty manifest": lambda entry: (entry / "manifest.json").write_text(""),
    "cut-short manifest": lambda entry: (entry / "manifest.json").write_text((entry / "manifest.json").read_text()[:40]),
    "missing manifest": lambda entry: (entry / "manifest.json").unlink(),
    "manifest of another shape": lambda entry: (entry / "manifest.json").write_text("[1, 2]"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_entry_is_never_served_but_moved_aside_and_the_store_heals(tmp_path, damage):
    store = ArtifactStore(str(tmp_path / "store"))
    artifact = store.commit("import", "k1", _build(store, b"abc"), {})
    DAMAGE[damage](artifact.directory)
    assert store.lookup("import", "k1") is None
    (aside,) = (tmp_path / "store" / ".quarantine").iterdir()
    assert aside.name.startswith("import-k1-") and not artifact.directory.exists()
    assert len(store.notices) == 1 and str(aside) in store.notices[0]
    healed = store.commit("import", "k1", _build(store, b"abc"), {})
    assert store.lookup("import", "k1").digest == healed.digest == artifact.digest


def _commit_same_key(root: str, payload: bytes, barrier, results):
    store = ArtifactStore(root)
    build_dir = _build(store, payload)
    barrier.wait()
    artifact = store.commit("import", "same-key", build_dir, {"writer": payload.decode()})
    results.put(artifact.digest)


def test_concurrent_writers_of_one_key_both_succeed_and_leave_one_entry(tmp_path):
    root = str(tmp_path / "store")
    context = multiprocessing.get_context("spawn")
    writers = 4
    barrier, results = context.Barrier(writers), context.Queue()
    processes = [context.Process(target=_commit_same_key, args=(root, b"same", barrier, results)) for _ in range(writers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    digests = {results.get(timeout=5) for _ in range(writers)}
    assert len(digests) == 1
    store = ArtifactStore(root)
    assert store.entries("import") == ["same-key"]
    manifest = json.loads((tmp_path / "store" / "import" / "same-key" / "manifest.json").read_text())
    assert manifest["digest"] in digests
    assert list((tmp_path / "store" / ".tmp").iterdir()) == []  # losers cleaned up


def test_fsspec_store_commits_manifest_last_and_fetches_to_a_local_cache(tmp_path):
    url = f"memory://store-{tmp_path.name}"
    store = ArtifactStore(url, local_cache=tmp_path / "cache")
    artifact = store.commit("fold_check", "k9", _build(store, b"remote"), {})
    assert artifact.directory.is_relative_to(tmp_path / "cache")
    assert (artifact.directory / "data.bin").read_bytes() == b"remote"
    fresh = ArtifactStore(url, local_cache=tmp_path / "other-cache")
    assert fresh.lookup("fold_check", "k9").digest == artifact.digest
    assert fresh.entries("fold_check") == ["k9"]


def _build_and_wait(root: str, paths, hold: bool):
    store = ArtifactStore(root)
    paths.put(str(_build(store, b"partial")))
    paths.close()
    paths.join_thread()  # delivered before os._exit
    if hold:
        time.sleep(600)  # a live run, still building
    os._exit(0)  # a run that died without cleaning up (its lock goes with it, as with SIGKILL)


def test_orphan_build_directories_are_collected_and_live_builds_left_alone(tmp_path):
    root = str(tmp_path / "store")
    context = multiprocessing.get_context("spawn")
    paths = context.Queue()
    live = context.Process(target=_build_and_wait, args=(root, paths, True))
    dead = context.Process(target=_build_and_wait, args=(root, paths, False))
    live.start()
    live_dir = Path(paths.get(timeout=120))
    dead.start()
    dead_dir = Path(paths.get(timeout=120))
    dead.join(timeout=120)
    legacy = tmp_path / "store" / ".tmp" / "from-an-older-version"  # no lock file at all
    legacy.mkdir()
    try:
        store = ArtifactStore(root, local_cache=tmp_path / "cache")
        assert store.collect_orphans() == 2
        assert live_dir.is_dir() and not dead_dir.exists() and not legacy.exists()
        assert "removed 2 unfinished build directories" in store.notices[0]
    finally:
        live.kill()
        live.join()
    assert ArtifactStore(root, local_cache=tmp_path / "cache").collect_orphans() == 1 and not live_dir.exists()
    assert list((tmp_path / "store" / ".tmp").iterdir()) == []


@pytest.mark.parametrize("remote", [False, True], ids=["local", "fsspec"])
def test_gc_keeps_the_newest_runs_entries_and_their_inputs(tmp_path, remote):
    url = f"memory://gc-{tmp_path.name}" if remote else str(tmp_path / "store")
    store = ArtifactStore(url, local_cache=tmp_path / "cache")

    def entry(stage: str, key: str, inputs: dict[str, str], parts: dict[str, str] | None = None) -> None:
        store.commit(stage, key, _build(store, key.encode()), {"inputs": {name: {"key": k, "digest": "d"} for name, k in inputs.items()},
                                                               "parts": {name: {"key": k, "digest": "d"} for name, k in (parts or {}).items()}})

    entry("import", "old-import", {})
    entry("fold_check", "old-fold", {"import": "old-import"})
    entry("import", "new-import", {})
    entry("fold_check", "new-fold", {"import": "new-import"})
    entry("calibrate.observation", "new-observation", {"fold_check": "new-fold"})
    entry("calibrate.observation", "stray-observation", {"fold_check": "new-fold"})  # no kept stage used it
    entry("calibrate", "new-calibrate", {"fold_check": "new-fold"}, {"calibrate.observation": "new-observation"})
    entry("calibrate", "stray", {"fold_check": "new-fold"})  # no run used it
    store.record_run({"import": "old-import", "fold_check": "old-fold"}, origin="test")
    store.record_run({"calibrate": "new-calibrate"}, origin="test")  # a run until calibrate names its inputs too; they are kept anyway
    project = tmp_path / "project"  # no dvc.lock here
    project.mkdir()
    everything = {(s, k) for s in store.stages_present() for k in store.entries(s)}

    plan = plan_gc(store, project, keep_runs=1)
    assert set(plan.keep) == {("calibrate", "new-calibrate"), ("calibrate.observation", "new-observation"),
                              ("fold_check", "new-fold"), ("import", "new-import")}
    assert set(plan.remove) == everything - set(plan.keep) and len(plan.old_records) == 1
    assert {(s, k) for s in store.stages_present() for k in store.entries(s)} == everything  # planning removes nothing

    run_gc(store, plan)
    assert {(s, k) for s in store.stages_present() for k in store.entries(s)} == set(plan.keep)
    assert store.lookup("calibrate.observation", "new-observation") is not None and len(store.run_records()) == 1
    assert set(plan_gc(store, project, keep_runs=0).remove) == set(plan.keep)  # no runs kept: nothing referenced


LEASE_AND_DIE = """
import os, sys
from pipeline.store import ArtifactStore, RunLease
RunLease(ArtifactStore(sys.argv[1]), origin="killed").hold("import", "dead-import")
os._exit(9)  # killed: its record stays live
"""


@pytest.mark.parametrize("remote", [False, True], ids=["local", "fsspec"])
def test_gc_keeps_what_a_live_run_holds_whatever_keep_runs_says(tmp_path, remote):
    url = f"memory://lease-{tmp_path.name}" if remote else str(tmp_path / "store")
    store = ArtifactStore(url, local_cache=tmp_path / "cache")
    for stage, key in (("import", "held-import"), ("calibrate", "held-calibrate"), ("import", "dead-import")):
        store.commit(stage, key, _build(store, key.encode()), {})
    project = tmp_path / "project"
    project.mkdir()
    lease = RunLease(store, origin="test")
    lease.hold("import", "held-import")
    lease.hold("calibrate", "held-calibrate")
    if not remote:  # a run killed while it held an entry: its record is an ordinary one (memory:// is this process's own)
        killed = subprocess.run([sys.executable, "-c", LEASE_AND_DIE, url], cwd=PROJECT_ROOT, capture_output=True, text=True)
        assert killed.returncode == 9, killed.stderr
    plan = plan_gc(store, project, keep_runs=0)
    assert set(plan.keep) == {("import", "held-import"), ("calibrate", "held-calibrate")} and plan.live_runs == 1
    assert plan.remove == [("import", "dead-import")] and len(plan.old_records) == (0 if remote else 1)
    run_gc(store, plan)
    lease.close({"import": "held-import"})  # the run ended: its record is the entries it used, one of the newest runs' or not
    record = json.loads(store.fs.cat_file(lease.path))
    assert not holds_entries(record) and record["stages"] == {"import": "held-import"}
    assert set(plan_gc(store, project, keep_runs=1).keep) == {("import", "held-import")}
    assert set(plan_gc(store, project, keep_runs=0).remove) == {("import", "held-import"), ("calibrate", "held-calibrate")}


def test_a_lease_of_another_machine_is_honoured_for_a_week_after_it_was_last_written(tmp_path):
    record = {"live": True, "host": "another-machine", "pid": "1", "pid_started": "1.0", "time": time.time() - 3600, "stages": {}}
    assert holds_entries(record) and not holds_entries({**record, "time": time.time() - LEASE_SECONDS - 1})
    assert not holds_entries({**record, "live": False})


def test_gc_during_a_run_leaves_what_the_run_has_written_and_the_run_succeeds(tmp_path, model_cache):
    """The round-4 case: `gc --keep-runs 0` while a run is between calibrate and its end removed the calibrate entry the
    run had just written, and the run failed at emit_ir."""
    store = tmp_path / "store"
    run = subprocess.Popen([sys.executable, "run.py", f"store.url={store}", f"store.cache_dir={model_cache}", tracking_override(tmp_path),
                            f"hydra.run.dir={tmp_path / 'hydra'}"], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while run.poll() is None and not list(store.glob("calibrate/*/manifest.json")):
            time.sleep(0.05)
        assert run.poll() is None, "the run ended before gc could run beside it"
        collected = subprocess.run([sys.executable, "-m", "pipeline.store", "gc", "--keep-runs", "0", "--store", str(store)],
                                   cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
        assert collected.returncode == 0 and "1 run(s) in progress" in collected.stdout, collected.stdout + collected.stderr
        calibrated = list(store.glob("calibrate/*/manifest.json"))
        assert calibrated and not any("calibrate/" in line for line in collected.stdout.splitlines() if line.startswith("removed "))
        _, stderr = run.communicate(timeout=600)
    finally:
        run.kill()
    assert run.returncode == 0, stderr[-3000:]
    assert all(path.is_file() for path in calibrated)


def test_gc_cli_dry_run_removes_nothing(tmp_path):
    store = ArtifactStore(str(tmp_path / "store"))
    store.commit("import", "k1", _build(store, b"x"), {})
    completed = subprocess.run([sys.executable, "-m", "pipeline.store", "gc", "--dry-run", "--store", str(tmp_path / "store")],
                               cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert completed.returncode == 0, completed.stderr
    assert "would remove import/k1" in completed.stdout and store.entries("import") == ["k1"]
    completed = subprocess.run([sys.executable, "-m", "pipeline.store", "gc", "--store", str(tmp_path / "store")],
                               cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert completed.returncode == 0 and "removed 1 entry" in completed.stdout and store.entries("import") == []


def test_a_data_set_is_read_once_per_run_and_again_by_the_next(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "batch").write_bytes(b"first images")
    first = path_digest(data)
    with one_reading_of_data():
        assert data_digest(data) == first
        (data / "batch").write_bytes(b"other images")
        assert data_digest(tmp_path / "." / "data") == first  # remembered within the run, whatever the spelling
    changed = data_digest(data)
    assert changed == path_digest(data) != first  # outside a run, and in the next one, read again
    with one_reading_of_data():
        assert data_digest(data) == changed


def test_a_stored_part_depends_only_on_config_its_stage_declares():
    calibrate = stage_named("calibrate")
    material = {"calib": {"num_bins": 1024, "auto": {"budget_s": 60}}, "data": {"kind": "digits"}}
    assert material_of(calibrate, material, "calib.num_bins") == 1024
    assert material_of(calibrate, material, "calib.auto.budget_s") == 60 and material_of(calibrate, material, "data") == {"kind": "digits"}
    with pytest.raises(KeyError, match="'model.file', which the stage does not declare"):
        material_of(calibrate, material, "model.file")
