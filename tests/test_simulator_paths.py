"""The simulator's fast path (compiled / im2col-free kernels, the batch shared among the cores)
computes the reference path's integers (every layer's reference kernel, one image at a time),
on the real QAT model of ../shared and on a keras.applications network, layer by layer."""

from __future__ import annotations

import os

import numpy as np
import pytest
from rich.console import Console

from conftest import CIFAR10_DIR, MODELS, compose
from core.ir.io import read_ir
from core.ir.ops import OPS
from core.ir.simulator import IntegerSimulator
from pipeline.main import run_pipeline

QUIET = Console(file=open(os.devnull, "w"))
MBV1 = MODELS / "mobilenet_v1_0.5_128_cifar10" / "graph.pb"


def emitted_ir(workspace, *overrides: str):
    summary = run_pipeline(compose(*workspace, *overrides, "until=emit_ir"), console=QUIET)
    return read_ir(summary.results[-1].artifact.directory)


def assert_fast_path_is_the_reference(ir, images: np.ndarray) -> None:
    fast = IntegerSimulator(ir).run(images, keep_all=True)
    reference_simulator = IntegerSimulator(ir, reference=True)
    one_by_one = [reference_simulator.run(images[n : n + 1], keep_all=True) for n in range(len(images))]
    assert fast.keys() == one_by_one[0].keys()
    for layer in ir.layers:
        expected = np.concatenate([values[layer.name] for values in one_by_one])
        np.testing.assert_array_equal(fast[layer.name], expected, err_msg=f"{layer.name} ({layer.operation})")


def test_the_fast_kernels_are_declared_for_the_heavy_operations_only_where_they_exist():
    assert {name for name, op in OPS.items() if op.fast_kernel is not None} == {"conv", "dwconv", "deconv"}  # deconv: conv's on the stuffed input
    assert all(op.simulator_kernel is (op.fast_kernel or op.kernel) for op in OPS.values())


@pytest.mark.skipif(not (MBV1.is_file() and CIFAR10_DIR.is_dir()),
                    reason=f"needs the QAT MobileNet-v1 at {MBV1} and CIFAR-10 at {CIFAR10_DIR} (../shared)")
def test_the_real_qat_model_simulates_to_the_reference_paths_integers(workspace):
    from core.data.datasets import load_split

    ir = emitted_ir(workspace, "model=mbv1_cifar10", "calib.method=qat", f"data.path={CIFAR10_DIR}", "calib.num_images=16", "data.eval_num_images=32")
    preprocess = {"size": [128, 128], "channels": 3, "resize": "tf_bilinear", "scale": 127.5, "offset": -1.0}
    images = load_split("cifar10", CIFAR10_DIR, "test_batch", preprocess, limit=7).images
    assert {layer.operation for layer in ir.layers} >= {"conv", "dwconv"}
    assert_fast_path_is_the_reference(ir, images)


@pytest.mark.skipif(not CIFAR10_DIR.is_dir(), reason=f"calibrates on CIFAR-10, expected at {CIFAR10_DIR} (../shared/data)")
def test_a_keras_application_simulates_to_the_reference_paths_integers(workspace, tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10)
    model.save(tmp_path / "mobilenetv2.keras")
    ir = emitted_ir(workspace, "model=keras_cifar10", "model.name=mobilenetv2", "model.format=keras",
                    f"model.file.path={tmp_path / 'mobilenetv2.keras'}", f"data.path={CIFAR10_DIR}", "calib.num_images=16", "data.eval_num_images=32")
    images = np.random.default_rng(0).uniform(-1, 1, (5, 32, 32, 3)).astype(np.float32)
    assert_fast_path_is_the_reference(ir, images)
