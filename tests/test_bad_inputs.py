"""Bad input as a careless user or an attacker gives it, through the product path (the composed
config into run_or_explain, what run.py calls): each class fails with one clear message that names
the key or file, no traceback, and, where it can be checked before work, before any stage runs."""

from __future__ import annotations

import io
import math
import shutil
import sqlite3
import struct
import subprocess
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import tensorflow as tf
from hydra import compose as hydra_compose, initialize_config_dir
from rich.console import Console

from conftest import CIFAR10_DIR, PROJECT_ROOT, tracking_override
from pipeline.cli import run_or_explain
from pipeline.config import register


def _explained(tmp_path: Path, *overrides: str) -> tuple[object, str]:
    """run.py's path: the composed config, run or explained; what it printed."""
    register()
    workspace = [f"store.url={tmp_path / 'store'}", tracking_override(tmp_path),
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
    ("target.scheme.bits=16", "target.scheme.bits=16: the calibration table, the IR"),
    ("target.scheme=tflite_int8", "target.scheme='tflite_int8': a scheme is chosen with target/scheme=NAME, one of pow2_symmetric, "
                                  "tflite_int8"),
    ("target=accel target/scheme=tflite_int8", "accelerator.patterns[0].activations: does not apply to conv"),
    ("limits.memory_mb=0", "limits.memory_mb=0: must be a positive number"),
    ("target.scheme.min_log2scale=20 target.scheme.max_log2scale=-20",
     "target.scheme.min_log2scale=20 is above target.scheme.max_log2scale=-20: no log2scale is within"),
    ("target.scheme.min_shift=9 target.scheme.max_shift=3", "target.scheme.min_shift=9 is above target.scheme.max_shift=3"),
    # not a 30-line ResourceExhaustedError from the training child after minutes
    ("model.builtin.width=100000", "model.builtin.width=100000: training the built-in model needs at least"),
])
def test_target_and_limit_rules_that_no_stage_implements_are_refused(tmp_path, override, expected):
    _refused(tmp_path, expected, *override.split())


def test_every_missing_input_is_reported_at_once_before_any_stage(tmp_path):
    """A user fixes every path in one go; mbv1's test image, named only by its digest and not in the cache, is none of
    them (emit_ir takes the first evaluation image)."""
    printed = _refused(tmp_path, "2 inputs are missing or unusable:", "model=mbv1_cifar10",
                       f"model.file.path={tmp_path / 'missing.pb'}", f"data.path={tmp_path}")
    assert f"- model.file.path={tmp_path / 'missing.pb'}: no such file" in printed
    assert f"- data.path={tmp_path}:" in printed and "model.test_image" not in printed


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


def test_calibration_batches_shrink_to_the_budget_and_say_so(tmp_path, model_cache):
    """The digits model at a budget that holds only a few images' activations per batch: the run completes."""
    summary, printed = _explained(tmp_path, "limits.memory_mb=1", "calib.batch_size=256", "until=calibrate",
                                  "model.builtin.epochs=2", f"store.cache_dir={model_cache}")
    assert summary is not None, printed
    assert "calibrating in batches of" in printed and "not calib.batch_size=256" in printed


# --- what a careless-user battery found (issue: inputs as users have them) ---------------------------
def _keras_file(path: Path, nan_weight: bool = False) -> Path:
    """A small untrained CIFAR-shaped Keras classifier: optionally a NaN in its conv kernel."""
    import keras

    inputs = keras.Input((32, 32, 3))
    conv = keras.layers.Conv2D(4, 3)
    pooled = keras.layers.GlobalAveragePooling2D()(conv(inputs))
    model = keras.Model(inputs, keras.layers.Dense(10, name="classes")(pooled))
    if nan_weight:
        kernel, bias = conv.get_weights()
        kernel[0, 0, 0, 0] = float("nan")
        conv.set_weights([kernel, bias])
    model.save(path)
    return path


@pytest.mark.parametrize("target", ["tflite_int8", "tflite_int16x8"])
def test_keep_float_on_a_target_of_integers_only_is_refused_before_any_stage(tmp_path, target):
    """Round 4: refused at calibrate, after import and fold_check."""
    printed = _refused(tmp_path, f"calib.keep_float=['conv1']: target={target} computes every layer in integers (layers kept in "
                                 "float (calib.keep_float): an int8 .tflite keeps none)", f"target={target}", "calib.keep_float=[conv1]")
    assert "target=tf2ir" in printed


def test_num_bins_beyond_the_budget_is_refused_before_any_stage(tmp_path):
    _refused(tmp_path, "calib.num_bins=1000000000: one tensor's histogram needs 96.9 GiB, over limits.memory_mb=4096",
             "calib.num_bins=1000000000")


def test_num_bins_whose_histograms_together_exceed_the_budget_are_refused_before_collecting(tmp_path, model_cache):
    printed = _refused(tmp_path, "calib.num_bins=4000000: the histograms of 9 tensors needs 640.9 MiB, over the memory budget "
                       "limits.memory_mb=512", "calib.num_bins=4000000", "limits.memory_mb=512", "model.builtin.epochs=1",
                       f"store.cache_dir={model_cache}", before_any_stage=False)
    assert "lower calib.num_bins" in printed


def test_more_calibration_images_than_the_data_holds_says_so(tmp_path, model_cache):
    summary, printed = _explained(tmp_path, "calib.num_images=5000", "until=calibrate", "model.builtin.epochs=1", f"store.cache_dir={model_cache}")
    assert summary is not None, printed
    assert "calib.num_images=5000, but digits/train holds 1437: calibrating on all 1437" in printed


def test_an_unknown_key_added_with_plus_is_refused_naming_the_keys_there_are(tmp_path):
    _refused(tmp_path, "calib.foo: not a config key; calib has auto, batch_size,", "+calib.foo=1")


def test_a_cache_dir_that_is_a_file_is_refused_before_any_stage(tmp_path):
    (tmp_path / "cache-file").write_text("")
    _refused(tmp_path, f"store.cache_dir={tmp_path / 'cache-file'}: is a file", f"store.cache_dir={tmp_path / 'cache-file'}")


def test_a_tracking_uri_of_an_unknown_scheme_is_refused_before_any_stage(tmp_path):
    _refused(tmp_path, "tracking_uri=gopher://host/x: MLflow cannot track runs in a gopher:// store", "tracking_uri=gopher://host/x")


def test_a_tracking_database_that_is_not_sqlite_or_is_damaged_is_refused(tmp_path):
    (tmp_path / "notes.db").write_text("not a database\n")
    _refused(tmp_path, f"{tmp_path / 'notes.db'} is not an SQLite database", f"tracking_uri=sqlite:///{tmp_path / 'notes.db'}")
    import sqlite3

    damaged = tmp_path / "damaged.db"
    with sqlite3.connect(damaged) as connection:
        connection.execute("CREATE TABLE t (x)")
        connection.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 50)
    data = bytearray(damaged.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the first page's b-tree header and cells
    damaged.write_bytes(bytes(data))
    _refused(tmp_path, f"{damaged} is damaged", f"tracking_uri=sqlite:///{damaged}")


def test_a_tracking_database_locked_by_another_process_is_waited_for_then_refused(tmp_path, monkeypatch):
    import sqlite3
    import subprocess
    import sys

    from pipeline import tracking

    database = tmp_path / "busy.db"
    sqlite3.connect(database).execute("CREATE TABLE t (x)").connection.close()
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time\n"
                               f"c = sqlite3.connect({str(database)!r}, isolation_level=None); c.execute('BEGIN EXCLUSIVE')\n"
                               "print('locked', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        monkeypatch.setattr(tracking, "LOCK_WAIT_S", 0.5)
        _refused(tmp_path, f"{database} stayed locked by another process for 0.5 s", f"tracking_uri=sqlite:///{database}")
    finally:
        holder.kill()
        holder.wait()


def test_an_output_directory_that_cannot_be_made_is_one_line_before_hydra(tmp_path):
    import subprocess
    import sys

    (tmp_path / "a-file").write_text("")
    result = subprocess.run([sys.executable, "run.py", f"hydra.run.dir={tmp_path / 'a-file' / 'run'}"], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"hydra.run.dir={tmp_path / 'a-file' / 'run'}: cannot make the run's directory (Not a directory" in result.stderr


def test_the_dvc_entry_point_names_the_stages_for_an_unknown_one(capsys):
    from pipeline.dvc_stage import main

    assert main(["nope"]) == 2
    assert "nope is not a stage; choose one of import, fold_check, calibrate" in capsys.readouterr().err.replace("\n", "")


@pytest.mark.parametrize("text, expected", [("calib: [", "not readable as YAML"),
                                            ("calib:\n  foo: 1\n", "calib.foo: Key 'foo' not in 'CalibConfig'"),
                                            ("calib:\n  num_images: many\n", "calib.num_images: Value 'many'"),
                                            ("- 1\n", "not a mapping of config keys"),
                                            ("target:\n  scheme:\n    name: int4\n", "target.scheme.name='int4': not a quantization scheme")])
def test_a_params_yaml_that_is_not_yaml_or_not_the_schema_is_one_message(tmp_path, text, expected):
    from pipeline.config import ConfigError
    from pipeline.dvc_stage import load_params

    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(ConfigError, match="make params") as raised:
        load_params(tmp_path / "params.yaml")
    assert str(raised.value).startswith(f"{tmp_path / 'params.yaml'}: ") and expected in str(raised.value)


def test_a_define_that_breaks_the_build_names_codegen_cflags(tmp_path, model_cache):
    summary, printed = _explained(tmp_path, 'codegen.cflags=[-O2,"-Dmain=renamed"]', "model.builtin.epochs=1", f"store.cache_dir={model_cache}")
    assert summary is None and "Traceback" not in printed, printed  # the compiler's own diagnostics, then what to change
    assert "undefined reference to `main'" in printed
    assert "codegen.cflags=['-O2', '-Dmain=renamed'] may be what broke the build" in printed.replace("\n", "")


@contextmanager
def _small_disk(directory: Path, size: int) -> Iterator[Path]:
    """A tmpfs of `size` bytes mounted at `directory` (root only: skipped elsewhere), unmounted after (lazily: MLflow's
    engine keeps a database there open)."""
    directory.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "--lazy", str(directory)], check=True)


def test_a_full_disk_names_the_path_and_leaves_nothing_half_written(tmp_path, model_cache):
    with _small_disk(tmp_path / "small-disk", 256 * 1024) as disk:
        printed = _refused(tmp_path, "ran out of disk space writing " + str(disk / "store" / ".tmp"), f"store.url={disk / 'store'}",
                           "model.builtin.epochs=1", f"store.cache_dir={model_cache}", before_any_stage=False)
        assert "free space on that disk, or point store.url" in printed
        assert not list((disk / "store" / ".tmp").iterdir())  # the stage's build directory is gone
        assert all((entry / "manifest.json").is_file() for entry in (disk / "store").glob("[a-z]*/*"))


def test_an_export_to_a_full_disk_is_named_once_and_changes_nothing_there(tmp_path, model_cache):
    """Every artifact is copied beside the export before any is moved in: a full disk leaves the last export whole."""
    with _small_disk(tmp_path / "small-disk", 32 * 1024) as disk:
        before = {"metrics.json": "{}\n", "import/report.json": "an earlier run's\n"}
        for name, text in before.items():
            (disk / "out" / name).parent.mkdir(parents=True, exist_ok=True)
            (disk / "out" / name).write_text(text)
        printed = _refused(tmp_path, f"export_dir={disk / 'out'}: could not copy the artifacts there ([Errno 28] No space left on device, "
                                     f"writing {disk / 'out'}/.export.", f"export_dir={disk / 'out'}", "until=fold_check",
                           "model.builtin.epochs=1", f"store.cache_dir={model_cache}", before_any_stage=False)
        assert "[(" not in printed  # not shutil's list of every file it could not copy
        assert {str(path.relative_to(disk / "out")): path.read_text() for path in (disk / "out").rglob("*") if path.is_file()} == before
        assert sorted(path.name for path in (disk / "out").iterdir()) == ["import", "metrics.json"]


def test_a_tracking_database_on_a_full_disk_is_named_once_without_a_traceback(tmp_path, model_cache):
    """MLflow's SQLite database on a disk with no room to grow: one error naming tracking_uri (round 4: five tracebacks)."""
    database = Path(tracking_override(tmp_path).split("sqlite:///", 1)[1])
    with _small_disk(tmp_path / "small-disk", (math.ceil(database.stat().st_size / 4096) + 2) * 4096) as disk:  # it and two pages
        shutil.copyfile(database, disk / "mlflow.db")
        printed = _refused(tmp_path, f"tracking_uri=sqlite:///{disk / 'mlflow.db'}: the disk that holds the tracking store is full "
                                     "(MLflow: (sqlite3.OperationalError) database or disk is full); free space there",
                           f"tracking_uri=sqlite:///{disk / 'mlflow.db'}", "until=import", f"store.cache_dir={model_cache}",
                           before_any_stage=False)
        assert "sqlalche.me" not in printed
        with sqlite3.connect(disk / "mlflow.db") as connection:  # the database stays whole
            assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_nan_in_the_weights_names_the_constant_not_the_data(tmp_path):
    model = _keras_file(tmp_path / "nan.keras", nan_weight=True)
    printed = _refused(tmp_path, "holds 1 NaN or Inf value(s); the model's weights are damaged", "model=keras_cifar10",
                       f"model.file.path={model}", f"data.path={tmp_path}", "until=import", before_any_stage=False)
    assert "the constant " in printed and "conv2d" in printed and "check the data" not in printed


def test_an_ir_param_whose_header_declares_terabytes_is_refused_before_allocating(tmp_path, model_cache):
    import numpy as np

    import shutil

    from core.ir.io import read_ir
    from core.ir.records import IrError

    summary, printed = _explained(tmp_path, "until=emit_ir", "model.builtin.epochs=1", f"store.cache_dir={model_cache}")
    assert summary is not None, printed
    shutil.copytree(summary.results[-1].artifact.directory, tmp_path / "ir")  # a real IR, to damage
    param = next((tmp_path / "ir" / "params").glob("*_weight.npy"))
    header = {"descr": "|i1", "fortran_order": False, "shape": (1 << 21, 1 << 21)}  # 4 TiB of int8
    with param.open("wb") as stream:
        np.lib.format.write_array_header_1_0(stream, header)
        stream.write(b"\0" * 64)
    with pytest.raises(IrError, match=rf"{param}: .*header declares \[2097152, 2097152\] int8 \(4096.0 GiB\)"):
        read_ir(tmp_path / "ir")


def test_num_classes_below_the_labels_names_model_num_classes(tmp_path):
    model = _keras_file(tmp_path / "five.keras")
    _refused(tmp_path, "model.num_classes=5, but the evaluation labels go up to 9", "model=keras_cifar10",
             f"model.file.path={model}", f"data.path={CIFAR10_DIR}", "model.num_classes=5", "calib.num_images=16",
             "data.eval_num_images=64", before_any_stage=False)


@pytest.mark.parametrize("what", ["missing", "file"])
def test_store_gc_on_a_missing_path_or_a_file_is_an_error(tmp_path, capsys, what):
    from pipeline.store.__main__ import main

    target = tmp_path / "store"
    if what == "file":
        target.write_text("")
    assert main(["gc", "--store", str(target)]) == 2
    assert f"--store {target}: {'is a file' if what == 'file' else 'does not exist'}" in capsys.readouterr().out.replace("\n", "")


def test_negative_evaluation_labels_on_arrays_are_refused_before_any_stage_not_scored_as_zero(tmp_path):
    """A label outside the classes would make a green run report top-1 0% (and the float model's too)."""
    import numpy as np

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 16)
    labels[3] = -1
    np.savez(tmp_path / "arrays.npz", calib=rng.random((16, 8, 8, 1), np.float32), eval=rng.random((16, 8, 8, 1), np.float32),
             eval_labels=labels)
    _refused(tmp_path, f"{tmp_path / 'arrays.npz'}: eval_labels[3] is -1 (1 of 16 labels are negative); a label is a class index",
             "data=arrays", f"data.path={tmp_path / 'arrays.npz'}")


def test_an_array_named_for_an_input_no_model_has_is_refused_before_any_stage(tmp_path):
    """`calib/../../x` (round 4: refused only as "different shapes" at calibrate): the member's name is wrong, said so."""
    import numpy as np

    samples = np.zeros((4, 8, 8, 1), np.float32)
    np.savez(path := tmp_path / "arrays.npz", **{"calib/images": samples, "calib/../../x": samples, "eval/images": samples})
    _refused(tmp_path, f"{path}: the array 'calib/../../x' names the input '../../x', which no model has: an input's name is letters",
             "data=arrays", f"data.path={path}")


def test_arrays_whose_samples_hold_no_values_are_called_so_not_damaged(tmp_path):
    import numpy as np

    np.savez(path := tmp_path / "empty.npz", calib=np.zeros((256, 0), np.float32), eval=np.zeros((256, 0), np.float32))
    printed = _refused(tmp_path, f"{path}: 'calib' is float32 [256, 0]: each sample holds no values", "data=arrays", f"data.path={path}")
    assert "damaged" not in printed


def _npz_with_member(path: Path, member: bytes, eval_array) -> Path:
    """An .npz whose `calib` member is the given bytes (a header over too little data), `eval` a real array."""
    import zipfile

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, eval_array)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("calib.npy", member)
        archive.writestr("eval.npy", buffer.getvalue())
    return path


@pytest.mark.parametrize("shape, kept", [((64, 8, 8, 1), 4872 // 10), ((8_300_000_000, 1), None)],
                         ids=["truncated", "a 30.9 GiB header over 128 bytes"])
def test_an_npz_whose_array_holds_less_than_its_header_declares_is_called_damaged_before_any_stage(tmp_path, shape, kept):
    """Not 'EOF: reading array data' naming nothing, nor advice to raise limits.memory_mb: the file and the array, damaged."""
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.zeros((64, 8, 8, 1), np.float32))
    header = buffer.getvalue()[:128].replace(b"(64, 8, 8, 1)", str(shape).encode().ljust(len("(64, 8, 8, 1)")))
    member = header + buffer.getvalue()[128:][:kept] if kept else header
    path = _npz_with_member(tmp_path / "damaged.npz", member, np.zeros((16, 8, 8, 1), np.float32))
    printed = _refused(tmp_path, f"{path}: calib.npy declares float32 {list(shape)}", "data=arrays", f"data.path={path}")
    assert "the file is truncated or damaged" in printed and "memory_mb" not in printed


def test_all_zero_calibration_arrays_are_stopped_naming_the_arrays_not_a_preprocessing_arrays_never_get(tmp_path, model_cache):
    import numpy as np

    from conftest import compose
    from pipeline.main import run_pipeline
    from pipeline.quality import QualityFailed

    rng = np.random.default_rng(0)
    path = tmp_path / "zeros.npz"
    np.savez(path, calib=np.zeros((32, 8, 8, 1), np.float32), eval=rng.random((32, 8, 8, 1), np.float32),
             eval_labels=rng.integers(0, 10, 32))
    cfg = compose(f"store.url={tmp_path / 'store'}", tracking_override(tmp_path), "data=arrays",
                  f"data.path={path}", f"store.cache_dir={model_cache}")
    with pytest.raises(QualityFailed) as stopped:
        run_pipeline(cfg, console=Console(file=io.StringIO()))
    causes = " ".join(finding.causes for finding in stopped.value.findings)
    assert f"the arrays in data.path={path} (data=arrays applies no preprocessing" in causes
    assert "model.preprocess" not in causes


def test_a_constant_of_the_wrong_shape_is_named_with_its_layer_and_file(tmp_path):
    """An IR whose conv weight .npy has another shape (its manifest re-sealed): not 'conv weight of shape [7, 5, 3] (int8);
    kernel_size is [3, 3]' alone, but the layer and the file (the one the IR's directory has: MLCommons' names run past
    200 characters, so its file is named by a prefix and a digest)."""
    import re

    import numpy as np

    from conftest import MODELS
    from core.frontend.tflite import read_tflite
    from core.ir.io import write_ir
    from core.ir.records import IrError
    from core.ir.simulator import IntegerSimulator
    from core.ir.tflite_ir import ir_of_tflite

    path = MODELS / "mlperf_tiny_kws" / "kws_ref_model.tflite"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    ir = ir_of_tflite(read_tflite(path))
    write_ir(ir, tmp_path)  # the files the message must name
    conv = next(layer for layer in ir.layers if layer.operation == "conv")
    ir.params[conv.name]["weight"] = np.zeros((7, 5, 3), np.int8)
    inputs = np.zeros((1, *ir.input_shape), np.int8)
    with pytest.raises(IrError) as raised:
        IntegerSimulator(ir).run_int8(inputs)
    message = str(raised.value)
    named = re.findall(r"params/\S+_weight\.npy", message)
    assert message.startswith(f"layer {conv.name} (conv): ") and named and (tmp_path / named[0]).is_file(), message
    assert "int8 [7, 5, 3])" in message and "run emit_ir again" in message


def test_an_ir_that_departs_from_its_annotated_graph_is_blamed_at_simulate_naming_the_end_point_and_the_layer(tmp_path):
    """An IR whose output_shift was edited (its manifest re-sealed): simulate's SQNR guard names the end point (not '?')
    and the first layer whose integers depart from the annotated graph, the IR, before preprocessing."""
    import json

    from conftest import compose
    from pipeline.quality import findings_of

    report = {"end_points": [{"layer": "logits", "sqnr_db": 3.1, "cosine": 0.2}],
              "layer_agreement": [["stem", 1.0], ["block1", 0.996], ["block2", 0.31], ["logits", 0.05]]}
    (tmp_path / "report.json").write_text(json.dumps(report))
    (finding,) = findings_of(compose(), "simulate", {"sqnr_db_min": 3.1}, tmp_path)
    assert finding.subject == "end point logits"
    assert finding.causes.startswith("the IR computes other integers than the annotated graph from layer block2 on (31.0%")
    assert "run emit_ir again" in finding.causes


def test_a_tflite_weight_whose_shape_its_buffer_cannot_fill_is_called_damaged_before_any_stage(tmp_path):
    """A weight declaring [channels, 3, 3, 2^31 - 1] over its small buffer: the file is damaged, said before any stage,
    not a memory budget to raise."""
    from tensorflow.lite.tools import flatbuffer_utils

    from conftest import MODELS

    source = MODELS / "mlperf_tiny_kws" / "kws_ref_model.tflite"
    if not source.exists():
        pytest.skip(f"{source} is missing")
    model = flatbuffer_utils.read_model(str(source))
    graph = model.subgraphs[0]
    code = model.operatorCodes  # CONV_2D is 3 (older files keep it in deprecatedBuiltinCode)
    conv = next(operator for operator in graph.operators
                if 3 in (code[operator.opcodeIndex].builtinCode, code[operator.opcodeIndex].deprecatedBuiltinCode))
    weight = graph.tensors[conv.inputs[1]]
    weight.shape = [weight.shape[0], 3, 3, 2**31 - 1]
    damaged = tmp_path / "damaged.tflite"
    flatbuffer_utils.write_model(model, str(damaged))
    printed = _refused(tmp_path, f"model.file.path: {damaged}: tensor {conv.inputs[1]} ", "model=keras_cifar10", "model.format=tflite",
                       f"model.file.path={damaged}", "target=tflite_int8", f"data.path={CIFAR10_DIR}")
    assert "the file is damaged" in printed and "memory_mb" not in printed
