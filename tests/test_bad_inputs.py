"""Bad input as a careless user or an attacker gives it, through the product path (the composed
config into run_or_explain, what run.py calls): each class fails with one clear message that names
the key or file, no traceback, and, where it can be checked before work, before any stage runs."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
import tensorflow as tf
from hydra import compose as hydra_compose, initialize_config_dir
from rich.console import Console

from conftest import MBV1_GRAPH, PROJECT_ROOT
from pipeline.cli import run_or_explain
from pipeline.config import register


def _explained(tmp_path: Path, *overrides: str) -> tuple[object, str]:
    """run.py's path: the composed config, run or explained; what it printed."""
    register()
    workspace = [f"store.url={tmp_path / 'store'}", f"tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
                 f"store.cache_dir={tmp_path / 'cache'}"]
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=[*workspace, *overrides])
    output = io.StringIO()
    summary = run_or_explain(cfg, Console(file=output, width=400, soft_wrap=True))
    return summary, output.getvalue()


def _refused(tmp_path: Path, expected: str, *overrides: str, before_any_stage: bool = True) -> str:
    summary, printed = _explained(tmp_path, *overrides)
    assert summary is None, printed
    assert "Traceback" not in printed and printed.count("error:") == 1, printed
    assert expected in printed.replace("\n", ""), printed
    if before_any_stage:
        assert not any((tmp_path / "store").glob("*/*/manifest.json")), "a stage ran before the refusal"
    return printed


def _png(path: Path, width: int, height: int) -> Path:
    """A grayscale PNG that declares width x height but holds a few bytes: a decompression bomb."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = zlib.compress(b"\0" * (width + 1) * 4, 9)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", rows) + chunk(b"IEND", b""))
    return path


def _frozen(path: Path, build, input_shape) -> Path:
    """A frozen GraphDef of build(x) on a float placeholder x of `input_shape`."""
    with tf.Graph().as_default() as graph:
        x = tf.compat.v1.placeholder(tf.float32, input_shape, name="x")
        tf.identity(build(x), name="out")
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


def _broadcast_constant_graph(path: Path) -> Path:
    """1 KB on disk: one float_val broadcast to [65536, 65536, 2], 32 GiB once TensorFlow makes it."""
    from tensorflow.core.framework import attr_value_pb2, node_def_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

    def node(name, op, inputs=(), **attrs):
        made = node_def_pb2.NodeDef(name=name, op=op, input=list(inputs))
        for key, value in attrs.items():
            made.attr[key].CopyFrom(value)
        return made

    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in (65536, 65536, 2)])
    constant = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, float_val=[1.0])
    float_type = attr_value_pb2.AttrValue(type=types_pb2.DT_FLOAT)
    graph_def = tf.compat.v1.GraphDef(node=[
        node("x", "Placeholder", dtype=float_type, shape=attr_value_pb2.AttrValue(shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in (1, 1, 1, 2)]))),
        node("c", "Const", dtype=float_type, value=attr_value_pb2.AttrValue(tensor=constant)),
        node("out", "AddV2", ("x", "c"), T=float_type),
    ])
    path.write_bytes(graph_def.SerializeToString())
    assert path.stat().st_size < 2048
    return path


# --- refused at config time or in preflight, before any stage -------------------------------------
@pytest.mark.parametrize("override, expected", [
    ("target.bits=16", "target.bits=16: the calibration table, the IR"),
    ("target.symmetric=false", "target.symmetric=false: asymmetric"),
    ("target.per_channel_weights=true", "target.per_channel_weights=true with target.pow2_scales=true"),
    ("limits.memory_mb=0", "limits.memory_mb=0: must be a positive number"),
])
def test_target_and_limit_rules_that_no_stage_implements_are_refused(tmp_path, override, expected):
    _refused(tmp_path, expected, override)


def test_a_missing_test_image_is_found_before_any_stage(tmp_path):
    if not MBV1_GRAPH.exists():
        pytest.skip(f"needs ../shared: {MBV1_GRAPH} is missing")
    _refused(tmp_path, "model.test_image: no file given; set model.test_image.path", "model=mbv1_cifar10",
             f"model.file.path={MBV1_GRAPH}", f"data.path={tmp_path}")


def test_a_missing_data_path_is_found_before_any_stage(tmp_path):
    _refused(tmp_path, f"data.path={tmp_path / 'nowhere'}: {tmp_path / 'nowhere'} does not exist", "model=keras_cifar10",
             f"model.file.path={_frozen(tmp_path / 'm.pb', lambda x: x * 2.0, [None, 32, 32, 3])}",
             "model.format=frozen_graph", f"data.path={tmp_path / 'nowhere'}")


def test_a_decompression_bomb_test_image_is_named_before_any_stage(tmp_path):
    bomb = _png(tmp_path / "bomb.png", 30000, 30000)
    assert bomb.stat().st_size < 1024
    _refused(tmp_path, f"model.test_image: image {bomb}: Image size (900000000 pixels) exceeds limit",
             f"+model.test_image.path={bomb}")


def test_dev_zero_as_a_model_is_refused_without_reading_it(tmp_path):
    _refused(tmp_path, "model.file.path=/dev/zero: not a regular file", "model=keras_cifar10", "model.file.path=/dev/zero",
             "model.format=frozen_graph", f"data.path={tmp_path}")


def test_an_unwritable_store_is_refused_before_any_stage(tmp_path):
    (tmp_path / "a-file").write_text("")
    _refused(tmp_path, f"store.url={tmp_path / 'a-file' / 'store'}: cannot write there", f"store.url={tmp_path / 'a-file' / 'store'}")


def test_an_export_dir_that_is_a_file_is_refused_before_any_stage(tmp_path):
    (tmp_path / "exported").write_text("")
    _refused(tmp_path, f"export_dir={tmp_path / 'exported'}: is a file", f"export_dir={tmp_path / 'exported'}")


def test_a_bad_sqlite_tracking_path_is_refused_before_any_stage(tmp_path):
    (tmp_path / "a-file").write_text("")
    uri = f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}"
    _refused(tmp_path, f"tracking_uri={uri}: cannot write", f"tracking_uri={uri}")


# --- refused in the stage that reads the declared size, before allocating it ----------------------
def test_a_tiny_graph_declaring_a_32_gib_constant_is_refused_at_import(tmp_path):
    model = _broadcast_constant_graph(tmp_path / "bomb.pb")
    printed = _refused(tmp_path, "the constants (largest c [65536, 65536, 2], 32.0 GiB) needs 32.0 GiB, over the memory budget "
                       "limits.memory_mb=4096", "model=keras_cifar10", f"model.file.path={model}", "model.format=frozen_graph",
                       f"data.path={tmp_path}", "until=import", before_any_stage=False)
    assert "raise limits.memory_mb" in printed


def test_a_huge_declared_input_is_refused_at_import_not_allocated(tmp_path):
    model = _frozen(tmp_path / "wide.pb", lambda x: x * 2.0, [1, 100000, 100000, 3])
    _refused(tmp_path, "one image through the graph (largest tensor x:0, 111.8 GiB)", "model=keras_cifar10",
             f"model.file.path={model}", "model.format=frozen_graph", f"data.path={tmp_path}", "until=import",
             before_any_stage=False)


def test_calibration_batches_shrink_to_the_budget_and_say_so(tmp_path):
    """The digits model at a budget that holds only a few images' activations per batch: the run completes."""
    summary, printed = _explained(tmp_path, "limits.memory_mb=1", "calib.batch_size=256", "until=calibrate",
                                  "model.builtin.epochs=2")
    assert summary is not None, printed
    assert "calibrating in batches of" in printed and "not calib.batch_size=256" in printed
