"""Shared fixtures: the ../shared test data, a model cache seeded from it, and
configs composed exactly as run.py composes them."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = PROJECT_ROOT.parent / "shared"
MODELS = SHARED / "models"
MBV1_GRAPH = MODELS / "mobilenet_v1_0.5_128_cifar10" / "graph.pb"
SSD_GRAPH = MODELS / "mobilenet_v2_ssd_0.25_160" / "graph.pb"
CIFAR10_DIR = SHARED / "data" / "cifar-10-batches-py"

sys.path.insert(0, str(PROJECT_ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# the processes the tests start (run.py, DVC's stages, a sweep's jobs) cache the project's bytecode as Python does by
# default: where the environment turns caching off (PYTHONDONTWRITEBYTECODE), each compiled the project's modules again,
# 0.3 s a process (__pycache__ is ignored by git, DVC and the stages' code versions)
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def copy_of_the_project(directory: Path) -> Path:
    """The project's files (tracked, and untracked but not ignored) but its tests, benchmarks and docs, copied under
    `directory`: a project to add a file to, as a user would (tests/test_method_file.py, tests/test_op_file.py)."""
    copy = directory / "project"
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=PROJECT_ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in listed:
        if name and (PROJECT_ROOT / name).is_file() and not name.startswith(("tests/", "bench/", "docs/")):
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / name, copy / name)
    return copy


def ir_record(operation: str, fields: dict, name: str = "layer", previous_layer=("input",), next_layer=("endpoint",)):
    """The typed IR record of `operation` with these fields (the JSON keys of seed 000, 4.2)."""
    from core.ir.ops import OPS

    data = {"name": name, "operation": operation, "previous_layer": list(previous_layer), "next_layer": list(next_layer),
            **{key: value for key, value in fields.items() if key != "operation"}}
    return OPS[operation].record.from_json(data)


def compose(*overrides: str):
    """The typed config run.py would get for these overrides."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from pipeline.config import register, validate

    register()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return validate(hydra_compose(config_name="config", overrides=list(overrides)))


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> Path:
    """A download cache seeded from ../shared, as CI seeds it: models resolve by sha256, offline. One for the whole
    session, pytest-xdist's workers included (their base temporary directories share a parent): the built-in model is
    trained once (pipeline/resources.py: built_once's lock), as on a machine whose processes share its cache."""
    from pipeline.resources import seed_cache

    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "model-cache"
    cache.mkdir(exist_ok=True)
    for path in (MBV1_GRAPH, SSD_GRAPH, MODELS / "mobilenet_v1_0.5_128_cifar10" / "ship.png",
                 MODELS / "mobilenet_v2_ssd_0.25_160" / "test.jpg"):
        seed_cache(cache, path)
    return cache


@functools.cache
def _empty_mlflow_database() -> Path:
    """An MLflow SQLite database as MLflow creates it, empty: made once a test process (its schema's migrations take
    about a second), copied for each test that needs a fresh one."""
    from mlflow.tracking import MlflowClient

    directory = Path(tempfile.mkdtemp(prefix="mlflow-empty-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    MlflowClient(tracking_uri=f"sqlite:///{directory / 'mlflow.db'}").search_experiments()
    return directory / "mlflow.db"


def tracking_override(root: Path) -> str:
    """`tracking_uri=` a fresh MLflow database `root/mlflow.db` (an empty one MLflow made, copied there unless it is
    there already: a test that runs twice on one root keeps its runs)."""
    database = Path(root) / "mlflow.db"
    if not database.exists():
        database.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_empty_mlflow_database(), database)
    return f"tracking_uri=sqlite:///{database}"


@pytest.fixture
def workspace(tmp_path, model_cache):
    """Overrides that put the store and MLflow in a fresh directory, without pictures (a quarter of a small model's
    run): a test of pictures adds `pictures=true` (the default; the README's and DVC's runs draw them)."""
    return [
        f"store.url={tmp_path / 'store'}",
        f"store.cache_dir={model_cache}",
        tracking_override(tmp_path),
        "pictures=false",
    ]


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow (the model zoo: minutes each)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long model-zoo case, run with --slow (the default run covers every op and target)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with pytest --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
