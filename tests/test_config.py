"""Bad configuration fails before any stage runs, naming the key and the choices."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException

from conftest import PROJECT_ROOT, compose
from core.quantize.schemes import SCHEMES
from pipeline.config import CalibMethod, ConfigError


def test_default_config_is_the_digits_model_with_its_data():
    cfg = compose()
    assert cfg.model.name == "digits" and cfg.data.kind.value == "digits"
    assert cfg.calib.method is CalibMethod.mse


def test_a_model_names_its_default_data_and_data_can_be_overridden():
    assert compose("model=mbv1_cifar10").data.name == "cifar10"
    assert compose("model=ssd_mbv2").data.name == "images"
    assert compose("model=mbv1_cifar10", "data=images").data.name == "images"


def _chain(error: BaseException) -> str:
    """Hydra wraps OmegaConf's error; the user sees the whole chain."""
    messages = []
    while error is not None:
        messages.append(str(error))
        error = error.__cause__
    return "\n".join(messages)


def test_an_unknown_quantization_scheme_lists_the_choices():
    with pytest.raises(MissingConfigException) as error:
        compose("target/scheme=asymmetric")
    message = _chain(error.value)
    assert "target/scheme/asymmetric" in message and "Available options in 'target/scheme'" in message
    assert all(f"\t{name}\n" in message for name in SCHEMES)


def test_a_scheme_owns_its_settings_another_schemes_key_is_refused_naming_it():
    """target.scheme.* are the chosen scheme's own settings: a power-of-two scheme's on tflite_int8 is no key of it."""
    with pytest.raises(ConfigCompositionException) as error:
        compose("target=tflite_int8", "target.scheme.input_log2scale=3")
    message = _chain(error.value)
    assert "Key 'input_log2scale' not in 'TfliteInt8Settings'" in message and "target.scheme.input_log2scale" in message
    assert compose("target=tflite_int8", "target/scheme=pow2_symmetric", "target.scheme.input_log2scale=3").target.scheme.input_log2scale == 3
    with pytest.raises(ConfigError, match="target.scheme.name=tflite_int8: these are pow2_symmetric's settings; choose another scheme "
                                          "with target/scheme=tflite_int8"):
        compose("target.scheme.name=tflite_int8")


def test_unknown_calibration_method_lists_the_choices():
    with pytest.raises(ConfigCompositionException) as error:
        compose("calib.method=kll")
    message = _chain(error.value)
    assert "kll" in message and "calib.method" in message
    for method in CalibMethod:
        assert method.value in message


def test_unknown_model_lists_the_available_ones():
    with pytest.raises(ConfigCompositionException) as error:
        compose("model=nope")
    message = _chain(error.value)
    assert "model/nope" in message
    for model in ("digits", "mbv1_cifar10", "ssd_mbv2"):
        assert model in message


def test_unknown_key_is_rejected():
    with pytest.raises(ConfigCompositionException) as error:
        compose("calib.batchsize=8")
    assert "batchsize" in _chain(error.value)


@pytest.mark.parametrize(
    "override, key",
    [
        ("calib.batch_size=-1", "calib.batch_size"),
        ("calib.num_images=0", "calib.num_images"),
        ("calib.percentile=120", "calib.percentile"),
        ("fold_check.tolerance=-1e-3", "fold_check.tolerance"),
        ("data.eval_num_images=-300", r"data.eval_num_images=-300: must be a positive number"),  # evaluated 60 images, top-1 1.0
        ("data.eval_num_images=0", "data.eval_num_images"),
    ],
)
def test_out_of_range_values_name_the_key(override, key):
    with pytest.raises(ConfigError, match=key):
        compose(override)


@pytest.mark.parametrize("key", ["calib_split", "eval_split"])
@pytest.mark.parametrize("split", ["../../x.pkl", "/etc/passwd", "batches.meta", "data_batch_6"])
def test_a_cifar_split_is_one_of_its_batch_files_never_a_path(key, split):
    with pytest.raises(ConfigError, match=rf"data.{key}='{re.escape(split)}': a cifar10 data set has no such split; choose one of data_batch_1, "):
        compose("data=cifar10", f"data.{key}='{split}'")


@pytest.mark.parametrize("data, split, choices", [("images", "train", "all"), ("digits", "all", "train, test"),
                                                  ("arrays", "test", "calib, eval")])
def test_a_split_the_data_set_kind_has_not_is_refused_with_its_splits(data, split, choices):
    with pytest.raises(ConfigError, match=rf"data.calib_split='{split}': a {data} data set has no such split; choose one of {choices}$"):
        compose(f"data={data}", f"data.calib_split={split}")


@pytest.mark.parametrize("flag", ["-o/tmp/x", "-include/etc/passwd", "@/tmp/flags", "-fplugin=/tmp/evil.so", "-I/tmp", "-B/tmp", "O3"])
def test_codegen_cflags_take_compiler_options_never_files_or_plugins(flag):
    with pytest.raises(ConfigError, match=rf"codegen.cflags\[1\]='{re.escape(flag)}': not an optimization, -march/-mtune/-m, -f"):
        compose(f"codegen.cflags=[-O3,'{flag}']")
    assert compose("codegen.cflags=[-O3,'-march=native',-funroll-loops,-DQT_PORTABLE]").codegen.cflags[1] == "-march=native"


def test_until_must_name_a_stage():
    with pytest.raises(ConfigError, match="import"):
        compose("until=calibrat")


def test_run_py_refuses_before_any_stage_runs(tmp_path):
    store = tmp_path / "store"
    completed = subprocess.run(
        [sys.executable, "run.py", "calib.method=kll", f"store.url={store}", f"tracking_uri=sqlite:///{tmp_path}/m.db"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode != 0
    assert "calib.method=kll" in completed.stderr and "kl, minmax, mse, percentile, qat, auto" in completed.stderr  # every choice
    assert not store.exists() and not (tmp_path / "m.db").exists()


def test_an_error_is_printed_literally_brackets_and_all(tmp_path):
    """Rich markup must not eat `[...]` in a path: `[/x]` used to crash the printer itself."""
    missing = tmp_path / "[/x]" / "[bold]model.pb"
    completed = subprocess.run(
        [sys.executable, "run.py", "model=mbv1_cifar10", f"model.file.path='{missing}'", f"store.url={tmp_path / 'store'}",
         f"tracking_uri=sqlite:///{tmp_path}/m.db"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode != 0 and "Traceback" not in completed.stderr
    assert str(missing) in completed.stderr.replace("\n", "")


def test_an_unreachable_tracking_server_fails_in_seconds_before_any_stage(tmp_path):
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    store = tmp_path / "store"
    completed = subprocess.run(
        [sys.executable, "run.py", f"tracking_uri=http://127.0.0.1:{port}", f"store.url={store}"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode != 0 and "Traceback" not in completed.stderr
    assert f"tracking_uri=http://127.0.0.1:{port}: no MLflow server answers" in completed.stderr.replace("\n", "")
    assert not (store / "import").exists()


def test_run_py_prints_the_composed_config():
    completed = subprocess.run(
        [sys.executable, "run.py", "--cfg", "job", "model=ssd_mbv2"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr
    assert "normalized_input_image_tensor:0" in completed.stdout


def test_params_yaml_is_the_composed_default_config():
    """params.yaml is what DVC's Hydra composition writes for no overrides (`make params`)."""
    import yaml
    from omegaconf import OmegaConf

    from pipeline.config import to_plain

    composed = to_plain(OmegaConf.structured(compose()))
    committed = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    committed["store"]["cache_dir"] = composed["store"]["cache_dir"]  # resolved from the environment
    assert committed == composed


@pytest.mark.parametrize("overrides, expected", [
    (["sweep.rank_by=[annotate.sqnr_db]"], "sweep.rank_by: 'annotate.sqnr_db' is not a stage's headline metric; choose among "),
    (["sweep.rank_by=[]"], "sweep.rank_by=[]: name at least one metric"),
    (["tracking.register=../escape"], "tracking.register='../escape': a registered model's name starts with a letter or digit"),
])
def test_a_bad_sweep_rule_or_registered_name_is_refused_before_any_stage_runs(overrides, expected):
    with pytest.raises(ConfigError) as error:
        compose(*overrides)
    assert str(error.value).startswith(expected)
    if "choose among" in expected:  # the choices listed, a lower-is-better one among them
        assert "annotate.sqnr_db_min" in str(error.value) and "(a leading '-' ranks lower first)" in str(error.value)


def test_a_sweep_rule_may_rank_a_metric_lower_first():
    assert compose("sweep.rank_by=[-codegen.accel_cycles,annotate.top1]").sweep.rank_by == ["-codegen.accel_cycles", "annotate.top1"]
