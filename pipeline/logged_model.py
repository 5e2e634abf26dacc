"""The run's deployable result as an MLflow 3 logged model (`mlflow.search_logged_models()`, the run page's "Logged
models", the Models tab), linked to the run that made it and to its headline figures, and registered on request
(`tracking.register=<name>`).

What it holds (its artifacts, as MLflow's MLmodel layout):
- `model.tflite` where the target has one (tflite_int8), and a pyfunc flavor that runs it on LiteRT's reference kernels:
  `mlflow.pyfunc.load_model("models:/<id>").predict(int8 batch)`;
- `program/`: the generated C program, its headers and the accelerator's instruction streams (codegen's artifact);
- `ir/`: the IR (net_def.json and its parameters) and `calibration_table.json`;
- `MLmodel`: the signature (each input's and end point's shape and integer type) and, in its metadata, each input's
  and output's scale and zero point, the target and the scheme.
A run that made the same bytes as an earlier one (codegen's store key) links that model rather than logging a copy.
A run logs one when it reached codegen and no quality guard failed: a model that does not meet its limits is not one
to ship."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from core.ir.io import read_ir
from core.ir.network import Ir
from pipeline.liveness import PROCESS_TAGS, abandoned, this_process

if TYPE_CHECKING:  # MLflow takes seconds to import: only where a model is logged (signature_of imports it there)
    from mlflow.models import ModelSignature

TFLITE_FILE = "model.tflite"
PROGRAM_DIR = "program"
IR_DIR = "ir"
CALIBRATION_FILE = "calibration_table.json"
LOGGED_MODEL_TYPE = "int8-deployment"
CONTENT_TAG = "codegen_key"  # the codegen stage's store key: two runs that made the same bytes share one logged model
# what of a stage's artifact the model does not ship: its pictures, series and the store's manifest
NOT_SHIPPED = ("*.png", "*.svg", "series", "manifest.json")


def quantization_of(grid: Any) -> dict[str, Any]:
    """How a tensor's integers map to reals: its integer type, scale and zero point."""
    dtype = np.dtype(grid.dtype).name
    scale = getattr(grid, "step", None)  # an index grid (token ids) has none
    return {"dtype": dtype, "scale": scale, "zero_point": int(grid.zero_point)}


def io_of(ir: Ir, end_point_shapes: Mapping[str, list[int]]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(inputs, outputs): each network input's and end point's shape (one sample) and quantization."""
    inputs = {name: {"shape": list(ir.shape_of_network_input(name)), **quantization_of(ir.grid_of_network_input(name))}
              for name in ir.network_inputs}
    outputs = {name: {"shape": list(shape), **quantization_of(ir.layer(name).grid_of_output())}
               for name, shape in end_point_shapes.items()}
    return inputs, outputs


def signature_of(inputs: Mapping[str, dict], outputs: Mapping[str, dict]) -> "ModelSignature":
    """MLflow's tensor signature: a batch (-1) of each tensor, in its integer type."""
    from mlflow.models import ModelSignature  # MLflow (seconds to import) only where a model is logged, as tracking.py
    from mlflow.types.schema import Schema, TensorSpec

    def schema(tensors: Mapping[str, dict]) -> Schema:
        return Schema([TensorSpec(np.dtype(spec["dtype"]), (-1, *spec["shape"]), name) for name, spec in tensors.items()])
    return ModelSignature(inputs=schema(inputs), outputs=schema(outputs))


def stage_model(directory: Path, *, ir_dir: Path, calibration_dir: Path | None, codegen_dir: Path,
                metadata: Mapping[str, Any]) -> dict[str, dict]:
    """Lay the model out in `directory` (empty); the signature's tensors as io_of gives them."""
    import mlflow.pyfunc
    from mlflow.models import Model

    report = json.loads((codegen_dir / "report.json").read_text())
    inputs, outputs = io_of(read_ir(ir_dir), {point["layer"]: point["shape"] for point in report["end_points"]})
    shutil.copytree(codegen_dir, directory / PROGRAM_DIR, ignore=shutil.ignore_patterns(*NOT_SHIPPED))
    shutil.copytree(ir_dir, directory / IR_DIR, ignore=shutil.ignore_patterns(*NOT_SHIPPED, TFLITE_FILE))
    if calibration_dir is not None and (calibration_dir / CALIBRATION_FILE).is_file():
        shutil.copyfile(calibration_dir / CALIBRATION_FILE, directory / IR_DIR / CALIBRATION_FILE)
    model = Model(signature=signature_of(inputs, outputs), metadata={**metadata, "inputs": inputs, "outputs": outputs})
    if (codegen_dir / TFLITE_FILE).is_file():
        shutil.move(directory / PROGRAM_DIR / TFLITE_FILE, directory / TFLITE_FILE)
        mlflow.pyfunc.add_to_model(model, loader_module=__name__, data=TFLITE_FILE)
    model.save(str(directory / "MLmodel"))
    return {"inputs": inputs, "outputs": outputs}


NOT_IN_MODEL_NAMES = re.compile(r"[/:.%\"']")  # characters MLflow refuses in a logged model's name


def model_name(*parts: str) -> str:
    """A logged model's name from its parts (`digits-tf2ir-mse`), what MLflow refuses in one replaced by '_'."""
    return NOT_IN_MODEL_NAMES.sub("_", "-".join(parts))


def log_model(*, experiment_id: str, run_id: str, name: str, content_key: str, ir_dir: Path, calibration_dir: Path | None,
              codegen_dir: Path, params: Mapping[str, str], metrics: Mapping[str, float], metadata: Mapping[str, Any],
              register: str | None = None) -> str:
    """The model linked to `run_id` with its headline `metrics`, its id: the experiment's READY model of the same
    `content_key` (codegen's store key: the same bytes) where there is one, else a new one, READY once its files are
    stored. With `register`, a new version of that registered model."""
    import mlflow
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus

    client = mlflow.tracking.MlflowClient()
    found = [model for model in client.search_logged_models([experiment_id], filter_string=f"tags.{CONTENT_TAG} = '{content_key}'")
             if model.status == LoggedModelStatus.READY]
    model_id = found[0].model_id if found else _new_model(client, experiment_id, run_id, name, content_key, ir_dir, calibration_dir,
                                                          codegen_dir, params, metadata)
    mlflow.log_metrics(dict(metrics), run_id=run_id, model_id=model_id)
    client.log_outputs(run_id, [LoggedModelOutput(model_id, step=0)])
    if register is not None:
        mlflow.register_model(f"models:/{model_id}", register)
    return model_id


def _new_model(client, experiment_id: str, run_id: str, name: str, content_key: str, ir_dir: Path, calibration_dir: Path | None,
               codegen_dir: Path, params: Mapping[str, str], metadata: Mapping[str, Any]) -> str:
    tags = {CONTENT_TAG: content_key, "target": str(metadata.get("target", "")), "scheme": str(metadata.get("scheme", "")),
            **this_process()}  # while it is PENDING: a process killed before it finalized the model leaves it to a later run
    logged = client.create_logged_model(experiment_id, name=name, source_run_id=run_id, params=dict(params), tags=tags,
                                        model_type=LOGGED_MODEL_TYPE)
    try:
        with tempfile.TemporaryDirectory() as staging:
            stage_model(Path(staging), ir_dir=ir_dir, calibration_dir=calibration_dir, codegen_dir=codegen_dir, metadata=metadata)
            client.log_model_artifacts(logged.model_id, staging)
    except BaseException:
        _finalize(client, logged.model_id, "FAILED")
        raise
    _finalize(client, logged.model_id, "READY")
    return logged.model_id


def _finalize(client, model_id: str, status: str) -> None:
    client.finalize_logged_model(model_id, status)
    for tag in PROCESS_TAGS:
        client.delete_logged_model_tag(model_id, tag)


def close_abandoned_models(client, experiment_id: str) -> list[str]:
    """Mark FAILED the PENDING logged models whose process (this host's) is gone: a run killed while it logged one. Their
    ids. A later run of the same bytes logs a READY model (log_model links only READY ones)."""
    from mlflow.entities import LoggedModelStatus

    closed = []
    host = this_process()["host"]  # a finalized model carries no PROCESS_TAGS: only the pending ones of this host are read
    for model in client.search_logged_models([experiment_id], filter_string=f"tags.host = '{host}'", max_results=1000):
        if model.status == LoggedModelStatus.PENDING and abandoned(model.tags):
            _finalize(client, model.model_id, "FAILED")
            client.set_logged_model_tags(model.model_id, {"end_reason": "its run's process ended while logging it (killed?); "
                                                                        "marked FAILED by a later run"})
            closed.append(model.model_id)
    return closed


class TfliteModel:
    """The pyfunc flavor: the logged `.tflite` on LiteRT's reference kernels (those simulate proved the integers equal
    to), a batch of the input's integers in, the first output's integers out (a dict by name where the model has
    several outputs)."""

    def __init__(self, path: str):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType  # LiteRT where MLflow loads the flavor

        self.interpreter = Interpreter(model_path=path, num_threads=1, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)

    def predict(self, model_input: Any, params: dict | None = None) -> Any:
        interpreter = self.interpreter
        batches = model_input if isinstance(model_input, dict) else {detail["name"]: model_input
                                                                     for detail in interpreter.get_input_details()[:1]}
        details = interpreter.get_input_details()
        size = len(next(iter(batches.values())))
        for detail in details:
            interpreter.resize_tensor_input(detail["index"], [size, *detail["shape"][1:]], strict=False)
        interpreter.allocate_tensors()
        for detail, batch in zip(details, batches.values(), strict=True):
            interpreter.set_tensor(detail["index"], np.asarray(batch, detail["dtype"]))
        interpreter.invoke()
        outputs = {detail["name"]: np.array(interpreter.get_tensor(detail["index"])) for detail in interpreter.get_output_details()}
        return next(iter(outputs.values())) if len(outputs) == 1 else outputs


def _load_pyfunc(path: str) -> TfliteModel:
    """MLflow's pyfunc loader (the MLmodel's loader_module is this module): `path` is the logged model.tflite."""
    return TfliteModel(path)
