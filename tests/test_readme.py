"""Every command the README shows, run as written (with the paths it says to set): a README example that fails
is a defect a user meets first. The commands that need the user's own files, the DVC block (run in a fresh clone by
tests/test_dvc.py) and `make test` (what runs this) are each named with the test that covers them instead."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT, SHARED

README = PROJECT_ROOT / "README.md"
SH_BLOCK = re.compile(r"^( *)```sh\n(.*?)^\1```", re.S | re.M)
INLINE = re.compile(r"`(\.venv/bin/python run\.py [^`]*)`")
CIFAR = SHARED / "data" / "cifar-10-batches-py"

# a placeholder the user fills with a file of their own -> the test that runs the same command on one it makes
COVERED_ELSEWHERE = {
    "PATH/my_cnn.keras": "tests/test_user_models.py::test_a_tutorial_lenet_runs_all_stages_from_the_readme_config",
    "PATH/saved_model_dir": "tests/test_user_models.py::test_the_ir_is_the_same_whatever_format_the_model_was_saved_in",
    "PATH/autoencoder.keras": "tests/test_front_door.py::test_a_dense_autoencoder_with_batchnorm_runs_on_arrays",
    "PATH/pytorch_model.tflite": "tests/test_converter_forms.py::test_litert_torchs_batch_of_one_and_channel_first_views_are_read_and_run_all_stages_bit_exact",
    "onnx2tf -i": "bench/models_from_tools.py (make setup-torch: onnx2tf's environment, not in make test), on the files of its models",
    "dvc ": "tests/test_dvc.py::test_experiments_compare_by_their_headline_metrics_and_plots",
    "export PATH=": "tests/test_dvc.py::test_experiments_compare_by_their_headline_metrics_and_plots",
    "make test": "CI: .ci/run is `make test`, which runs this file",
    "target.scheme.runtime=tflm": "tests/test_mlperf_tiny_tflm.py::test_mlperf_tiny_int8_models_give_tflms_every_output_byte",
}
# five full MobileNet runs; ResNet-8 through every stage on 16x8 (tests/test_int16x8.py runs the scheme on digits): with --slow
SLOW = ("calib.method=qat,minmax,kl,percentile,mse", "target=tflite_int16x8")


def readme_commands() -> list[str]:
    """Each command of the README's sh blocks (continuation lines joined, comments dropped), then the inline ones."""
    text = README.read_text()
    commands = []
    for _, block in SH_BLOCK.findall(text):
        joined = re.sub(r"\\\n\s*", "", textwrap.dedent(block))
        commands += [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]
    return commands + INLINE.findall(text)


def _covered_elsewhere(command: str) -> str | None:
    return next((test for marker, test in COVERED_ELSEWHERE.items() if marker in command), None)


def test_the_readme_commands_are_found_and_the_tests_that_cover_the_others_exist():
    commands = readme_commands()
    assert len(commands) >= 20 and any("model=mbv1_cifar10" in command for command in commands)
    for test in {_covered_elsewhere(command) for command in commands} - {None}:
        if "::" in test:
            path, name = test.split("::")
            assert f"def {name}(" in (PROJECT_ROOT / path).read_text(), test


@pytest.fixture(scope="module")
def calibration_images(tmp_path_factory) -> Path:
    """The README's PATH/images: a directory of jpg/png images (its text names these two)."""
    directory = tmp_path_factory.mktemp("images")
    for name in ("mobilenet_v2_ssd_0.25_160/test.jpg", "motor.jpg"):
        shutil.copy(SHARED / "models" / name, directory)
    return directory


@pytest.mark.parametrize("command", [
    pytest.param(command, marks=[pytest.mark.slow] if any(marker in command for marker in SLOW) else [])
    for command in readme_commands() if _covered_elsewhere(command) is None],
    ids=lambda command: re.sub(r"[^A-Za-z0-9=.,_-]+", " ", command.replace(".venv/bin/python ", ""))[:70].strip())
def test_a_readme_command_runs_as_written(command, calibration_images):
    if not CIFAR.is_dir():
        pytest.skip(f"needs ../shared (the README's paths): {CIFAR} is missing")
    command = command.replace("PATH/images", str(calibration_images)).replace("PATH/cifar-10-batches-py", str(CIFAR))
    assert "PATH/" not in command, f"a placeholder with no file: {command}"
    completed = subprocess.run(["bash", "-c", command], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1500,
                               env={**os.environ, "COLUMNS": "100"})
    assert completed.returncode == 0, f"{command}\n{completed.stdout[-2000:]}\n{completed.stderr[-4000:]}"
    assert "Traceback" not in completed.stderr, completed.stderr[-4000:]
