"""What the product builds from settings alone (the built-in model) is built once a machine and kept in the download
cache (pipeline/resources.py: built_once), served only when every file matches its recorded digest: a new store reads
it, a damaged entry is built again, and a build that fails leaves nothing behind."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from conftest import PROJECT_ROOT, compose, tracking_override
from pipeline.hashing import file_digests
from pipeline.main import run_pipeline
from pipeline.resources import built_once


def _writer(calls: list, text: str = "weights"):
    def build(directory):
        calls.append(directory)
        directory.mkdir(parents=True)
        (directory / "model.bin").write_text(text)
        (directory / "sub").mkdir()
        (directory / "sub" / "result.json").write_text("{}")
    return build


def test_a_build_is_made_once_per_material_and_read_back_whole(tmp_path):
    calls: list = []
    first = built_once(tmp_path, {"settings": {"epochs": 2}}, _writer(calls))
    again = built_once(tmp_path, {"settings": {"epochs": 2}}, _writer(calls))
    assert len(calls) == 1 and again == first and (again / "model.bin").read_text() == "weights"
    other = built_once(tmp_path, {"settings": {"epochs": 3}}, _writer(calls, "other"))
    assert len(calls) == 2 and other != first and (other / "model.bin").read_text() == "other"


@pytest.mark.parametrize("damage", ["edited", "removed", "added", "manifest"])
def test_a_damaged_entry_is_built_again_and_heals(tmp_path, damage):
    calls: list = []
    directory = built_once(tmp_path, {"k": 1}, _writer(calls))
    if damage == "edited":
        (directory / "model.bin").write_text("weight5")
    elif damage == "removed":
        (directory / "sub" / "result.json").unlink()
    elif damage == "added":
        (directory / "stray.txt").write_text("?")
    else:
        (directory.parent / "manifest.json").write_text("{not json")
    healed = built_once(tmp_path, {"k": 1}, _writer(calls))
    assert len(calls) == 2 and (healed / "model.bin").read_text() == "weights" and not (healed / "stray.txt").exists()
    assert built_once(tmp_path, {"k": 1}, _writer(calls)) == healed and len(calls) == 2


def test_a_build_that_fails_leaves_no_entry(tmp_path):
    def failing(directory):
        directory.mkdir(parents=True)
        (directory / "half.bin").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        built_once(tmp_path, {"k": 1}, failing)
    assert [path.name for path in (tmp_path / "built").iterdir() if not path.name.endswith(".lock")] == []
    calls: list = []
    assert (built_once(tmp_path, {"k": 1}, _writer(calls)) / "model.bin").read_text() == "weights" and len(calls) == 1


BUILDER = """
import sys, time
from pathlib import Path
from pipeline.resources import built_once

def build(directory):
    with open(sys.argv[2], "a") as log:
        log.write("built\\n")
    time.sleep(1.0)  # long enough for the other process to find no entry and wait on the lock
    directory.mkdir(parents=True)
    (directory / "model.bin").write_text("weights")

print(built_once(Path(sys.argv[1]), {"k": 1}, build))
"""


def test_processes_that_want_one_entry_at_once_build_it_once(tmp_path):
    """A parallel sweep on a new cache: the second process waits for the first's build and reads it."""
    builds = tmp_path / "builds.log"
    processes = [subprocess.Popen([sys.executable, "-c", BUILDER, str(tmp_path / "cache"), str(builds)], cwd=PROJECT_ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert all(process.returncode == 0 for process in processes), outputs
    assert builds.read_text() == "built\n"
    (first, _), (second, _) = outputs
    assert first == second and (Path(first.strip()) / "model.bin").read_text() == "weights"


def test_a_cache_that_cannot_be_written_costs_only_the_rebuild(tmp_path):
    """A cache directory under a file (as a read-only one, for root too): each call builds, in a temporary directory."""
    (tmp_path / "a-file").write_text("")
    calls: list = []
    assert (built_once(tmp_path / "a-file" / "cache", {"k": 1}, _writer(calls)) / "model.bin").read_text() == "weights"
    assert (built_once(tmp_path / "a-file" / "cache", {"k": 1}, _writer(calls)) / "model.bin").read_text() == "weights"
    assert len(calls) == 2


def test_a_new_store_reads_the_built_in_model_trained_before_and_a_damaged_one_is_trained_again(tmp_path):
    """Three fresh stores on one download cache: the first trains the digits model, the second reads it (its import
    says so) with the same bytes, and after its graph is damaged in the cache the third trains it again."""
    cache = tmp_path / "cache"

    def imported(name: str):
        console = io.StringIO()
        cfg = compose(f"store.url={tmp_path / name / 'store'}", f"store.cache_dir={cache}", tracking_override(tmp_path / name),
                      "model.builtin.epochs=1", "until=import")
        summary = run_pipeline(cfg, console=Console(file=console, width=300))
        return file_digests(summary.results[0].artifact.directory), console.getvalue()

    trained, first_log = imported("first")
    read, second_log = imported("second")
    assert read == trained and "as trained before on this machine" not in first_log and "as trained before on this machine" in second_log
    (graph,) = (cache / "built").glob("*/files/graph.pb")
    graph.write_bytes(graph.read_bytes()[:-1])
    retrained, third_log = imported("third")
    assert retrained == trained and "as trained before on this machine" not in third_log
