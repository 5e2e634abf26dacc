"""A quantization scheme is one file: a copy of the project with one new module in core/quantize/schemes/ (TFLite's
int8 specification with symmetric activations, zero point 0, as accelerators without zero-point hardware require)
takes it as an option of the `target/scheme` config group, with its settings as `target.scheme.*`, and runs it
through all eight stages on the host and the accelerator, bit-exact with TFLite's reference kernels, with no other
file touched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PROJECT_ROOT, copy_of_the_project

SYMMETRIC = '''"""tflite_int8_symmetric: TFLite's int8 specification with symmetric activations (a test's scheme)."""

from dataclasses import dataclass
from typing import ClassVar

from core.quantize.schemes.base import register_scheme
from core.quantize.schemes.tflite_int8 import TfliteInt8, TfliteInt8Settings


@dataclass
class TfliteInt8SymmetricSettings(TfliteInt8Settings):
    name: str = "tflite_int8_symmetric"


@register_scheme
@dataclass(frozen=True)
class TfliteInt8Symmetric(TfliteInt8):
    """Activations at zero point 0: [-T, T] over 255 levels, T the larger magnitude the method keeps."""

    name: ClassVar[str] = "tflite_int8_symmetric"
    settings: ClassVar[type] = TfliteInt8SymmetricSettings

    def affine(self, low, high):
        magnitude = max(-float(low), float(high), 0.0)
        scale = magnitude / self.qmax if magnitude > 0 else 1.0
        return scale, 0, [self.qmin * scale, self.qmax * scale]
'''

PLACE = "core/quantize/schemes/tflite_int8_symmetric.py"


@pytest.fixture(scope="module")
def project_with_a_new_scheme(tmp_path_factory) -> Path:
    copy = copy_of_the_project(tmp_path_factory.mktemp("project"))
    assert not (copy / PLACE).exists()
    (copy / PLACE).write_text(SYMMETRIC)
    return copy


def _run_py(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], cwd=project, capture_output=True, text=True, timeout=900)


def test_the_readme_counts_one_place():
    readme = (PROJECT_ROOT / "README.md").read_text()
    section = readme[readme.index("Adding a quantization scheme"):]
    assert "core/quantize/schemes/<name>.py" in section[:600] and "(1 place)" in section[:600], section[:600]


def test_the_new_scheme_is_a_config_choice_with_its_own_settings(project_with_a_new_scheme):
    shown = _run_py(project_with_a_new_scheme, "target=accel_tflite", "target/scheme=tflite_int8_symmetric", "target.scheme.runtime=tflm",
                    "--cfg", "job")
    assert shown.returncode == 0, shown.stderr
    assert yaml.safe_load(shown.stdout)["target"]["scheme"] == {"name": "tflite_int8_symmetric", "bits": 8, "runtime": "tflm"}
    refused = _run_py(project_with_a_new_scheme, "target/scheme=tflite_int8_symmetric", "target.scheme.min_shift=1", "until=import")
    assert refused.returncode != 0 and "Key 'min_shift' not in 'TfliteInt8SymmetricSettings'" in refused.stderr, refused.stderr[-2000:]
    unknown = _run_py(project_with_a_new_scheme, "target/scheme=tflite_int8_symmetrc", "until=import")
    assert unknown.returncode != 0 and "\ttflite_int8_symmetric\n" in unknown.stderr, unknown.stderr[-2000:]


def test_the_new_scheme_runs_all_stages_bit_exact_on_the_accelerator(project_with_a_new_scheme, model_cache):
    project = project_with_a_new_scheme
    ran = _run_py(project, "target=accel_tflite", "target/scheme=tflite_int8_symmetric", "calib.num_images=64", "data.eval_num_images=60",
                  f"store.cache_dir={model_cache}", "export_dir=out", "pictures=false")
    assert ran.returncode == 0, ran.stderr[-3000:]
    metrics = json.loads((project / "out" / "metrics.json").read_text())
    assert metrics["simulate.reference_agreement"] == 1.0 and metrics["codegen.bitexact"] == 1.0, metrics
    assert metrics["partition.layers_accel"] > 0, metrics
    table = json.loads((project / "out" / "calibrate" / "calibration_table.json").read_text())
    chosen = [entry for entry in table["tensors"].values() if entry["kind"] in ("input", "activation") and entry["method"] != "fixed"]
    assert chosen and all(entry["zero_point"] == 0 for entry in chosen), [entry["zero_point"] for entry in chosen]
    layers = json.loads((project / "out" / "emit_ir" / "net_def.json").read_text())
    assert all(layer.get("output_zero_point", 0) == 0 for layer in layers if layer["operation"] in ("conv", "dwconv")), layers
