"""emit_ir and simulate as a user runs them: conformance with the TF2IR tool's IR,
the SSD graph's 95 layers, byte-stable emission, bit-exact agreement with the
annotated graph, and clear errors."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from rich.console import Console

from conftest import CIFAR10_DIR, MODELS, compose, tracking_override
from core.ir.io import NET_DEF_FILE, PARAMS_DIR, read_ir, validate_ir
from core.ir.records import IrError
from pipeline.main import run_pipeline
from pipeline.runner import StageFailed

QUIET = Console(file=open(os.devnull, "w"))
MBV1 = ["model=mbv1_cifar10", f"data.path={CIFAR10_DIR}", "calib.num_images=32", "data.eval_num_images=128"]


def _run(*overrides):
    return run_pipeline(compose(*overrides), console=QUIET)


def _artifact(summary, stage):
    return next(result.artifact for result in summary.results if result.stage.name == stage)


@pytest.fixture(scope="module")
def mbv1_qat(tmp_path_factory, model_cache):
    root = tmp_path_factory.mktemp("ir")
    return _run(*MBV1, "calib.method=qat", f"store.url={root / 'store'}", f"store.cache_dir={model_cache}",
                tracking_override(root))


def test_emitted_ir_agrees_with_the_reference_on_every_key_it_has(mbv1_qat):
    reference = json.loads((MODELS / "mobilenet_v1_0.5_128_cifar10" / "reference_net_def.json").read_text())
    emitted = json.loads((_artifact(mbv1_qat, "emit_ir").directory / NET_DEF_FILE).read_text())
    assert [layer["name"] for layer in emitted] == [layer["name"] for layer in reference]
    for ours, theirs in zip(emitted, reference):
        assert {key: ours.get(key) for key in theirs} == theirs, ours["name"]
        if ours["operation"] in ("conv", "dwconv"):
            assert ours["dilations"] == {"height": 1, "width": 1}


def test_every_layer_has_its_tensors_in_the_specs_layouts(mbv1_qat):
    directory = _artifact(mbv1_qat, "emit_ir").directory
    ir = read_ir(directory)
    for record in ir.layers:
        layer = record.to_json()
        name = layer["name"]
        output = np.load(directory / PARAMS_DIR / f"{name}_output.npy")
        assert output.dtype == np.int8 and output.shape == (layer["output_size"]["height"], layer["output_size"]["width"], layer["output_channel_num"])
        assert np.load(directory / PARAMS_DIR / f"{name}_input.npy").dtype == np.int8
        if layer["operation"] == "conv":
            kernel = layer["kernel_size"]
            assert ir.params[name]["weight"].shape == (kernel["height"], kernel["width"], layer["input_channel_num"], layer["output_channel_num"])
        if layer["operation"] == "dwconv":
            assert ir.params[name]["weight"].ndim == 3
        if layer.get("load_bias"):
            assert ir.params[name]["bias"].shape == (layer["output_channel_num"],)


def test_integer_simulation_matches_the_fake_quant_graph_layer_by_layer(mbv1_qat):
    metrics = mbv1_qat.metrics
    # annotate models the IR's integers exactly, its int8 input included: the same end points, bit for bit
    assert metrics["simulate.layer_agreement_min"] == 1.0 and metrics["simulate.end_point_agreement"] == 1.0
    assert abs(metrics["simulate.top1"] - metrics["annotate.top1_qat_graph"]) <= 0.02  # 128 images: a few images' worth
    assert metrics["simulate.sqnr_db_min"] > 15.0
    assert (_artifact(mbv1_qat, "simulate").directory / "layer_agreement.png").stat().st_size > 5000


def test_emission_is_byte_stable(mbv1_qat, tmp_path, model_cache):
    again = _run(*MBV1, "calib.method=qat", f"store.url={tmp_path / 'store'}", f"store.cache_dir={model_cache}",
                 tracking_override(tmp_path), "until=emit_ir")
    first, second = _artifact(mbv1_qat, "emit_ir"), _artifact(again, "emit_ir")
    assert first.key == second.key and first.manifest["files"] == second.manifest["files"]


def test_ssd_ir_has_the_tools_95_layers(workspace, tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    shutil.copy(MODELS / "mobilenet_v2_ssd_0.25_160" / "test.jpg", images)
    shutil.copy(MODELS / "motor.jpg", images)  # two images: the graph takes batches of one
    summary = _run("model=ssd_mbv2", f"data.path={images}", "calib.method=qat", *workspace)
    metrics = summary.metrics
    assert metrics["emit_ir.layers"] == 95
    assert (metrics["emit_ir.layers_conv"], metrics["emit_ir.layers_dwconv"], metrics["emit_ir.layers_add"], metrics["emit_ir.layers_reshape"]) == (55, 17, 11, 12)
    assert metrics["emit_ir.end_points"] == 12
    assert metrics["simulate.layer_agreement_min"] == 1.0 and metrics["simulate.end_point_agreement"] == 1.0
    ir = read_ir(_artifact(summary, "emit_ir").directory)
    add = next(layer for layer in ir.layers if layer.operation == "add")
    # previous_layer in the order the producers were processed (seed 000, 5.5), the operands by name
    assert add.previous_layer == ("FeatureExtractor_MobilenetV2_Conv_Conv2D_Fold", "FeatureExtractor_MobilenetV2_expanded_conv_project_Conv2D_Fold")
    assert add.operands() == (add.pl_name, add.add_name) == tuple(reversed(add.previous_layer))


def test_a_shift_outside_the_targets_range_names_the_layer_and_the_field(mbv1_qat, model_cache, tmp_path):
    with pytest.raises(StageFailed, match=r"layer MobilenetV1_\w+: output_shift = \d+ is outside"):
        _run(*MBV1, "calib.method=qat", "target.scheme.max_shift=3", f"store.url={tmp_path / 'store'}", f"store.cache_dir={model_cache}",
             tracking_override(tmp_path), "until=emit_ir")


def test_a_broken_ir_file_is_refused_naming_the_layer_and_the_field(mbv1_qat, tmp_path):
    directory = tmp_path / "ir"
    shutil.copytree(_artifact(mbv1_qat, "emit_ir").directory, directory)
    layers = json.loads((directory / NET_DEF_FILE).read_text())
    del layers[3]["output_shift"]
    with pytest.raises(IrError, match=f"layer {layers[3]['name']} .(dw)?conv.*output_shift"):
        validate_ir(layers)
    layers = json.loads((directory / NET_DEF_FILE).read_text())
    layers[0]["previous_layer"] = [layers[2]["name"]]
    with pytest.raises(IrError, match="not earlier layers"):
        validate_ir(layers)


def _ir_files(directory) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*"))
            if path.is_file() and path.name != "manifest.json"}


# SSD's IR, the golden one, is test_ssd_ir_has_the_tools_95_layers'; its input chosen or fixed: with --slow
@pytest.mark.parametrize("model", ["mbv1_cifar10", pytest.param("ssd_mbv2", marks=pytest.mark.slow)])
def test_a_qat_models_ir_is_the_same_byte_for_byte_whether_its_input_scale_is_chosen_or_fixed(workspace, tmp_path, model):
    """Their graphs take [-1, 1): the input's scale chosen from the data is the spec's fixed log2scale 7."""
    if model == "ssd_mbv2":
        data = tmp_path / "images"
        data.mkdir()
        shutil.copy(MODELS / "mobilenet_v2_ssd_0.25_160" / "test.jpg", data)
        shutil.copy(MODELS / "motor.jpg", data)
        common = ["model=ssd_mbv2", f"data.path={data}"]
    else:
        common = MBV1
    runs = [_run(*common, "calib.method=qat", "until=emit_ir", *workspace, *fixed) for fixed in ([], ["target.scheme.input_log2scale=7"])]
    chosen, fixed = (_artifact(summary, "emit_ir").directory for summary in runs)
    assert _ir_files(chosen) == _ir_files(fixed) and "net_def.json" in _ir_files(chosen)
    assert read_ir(chosen).input_log2scale == 7
