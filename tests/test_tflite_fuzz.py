"""The .tflite reader against LiteRT, differentially: the conformance matrix's one-operator files (tests/test_conformance.py),
each mutated where a damaged or careless file differs (an option's value, a tensor's shape, type, scale or zero point,
an operator's input, a constant's bytes), read by the product's import path (read_tflite, tflite_graph_def, the IR,
our kernels) and run by LiteRT's reference kernels, in a process of its own (a damaged file can crash it). Property:
LiteRT refuses it and we refuse it; or both run it, to the same bytes; or we refuse it naming what we refuse, where
LiteRT runs it. Never green where LiteRT refuses, never another exception than the reader's own, naming the file.

A bounded number of mutations (60) runs in `make test`; a soak more: `QT_FUZZ_EXAMPLES=2000 pytest tests/test_tflite_fuzz.py`."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

from test_conformance import CASES, Cell
from core.frontend.tflite import TfliteError, read_tflite
from core.frontend.tflite_graph import tflite_graph_def
from core.ir.records import IrError
from core.ir.tflite_interpreter import run_int8
from core.ir.tflite_ir import ir_of_tflite
from core.quantize.runtimes import RUNTIMES

EXAMPLES = int(os.environ.get("QT_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
INTS = [-1, 0, 1, 2, 3, 7, 2**31 - 1]
FLOATS = [0.0, -1.0, 2.0, 1e30, float("nan")]
TYPES = {schema.TensorType.INT8: np.int8, schema.TensorType.INT16: np.int16, schema.TensorType.INT32: np.int32,
         schema.TensorType.FLOAT32: np.float32, schema.TensorType.UINT8: np.uint8}
RUNTIME = RUNTIMES["litert_reference"]

# LiteRT in a process of its own: the file, the inputs (.npy) -> the output (.npy), or its refusal on stderr
LITERT = """
import sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
interpreter = Interpreter(model_path=sys.argv[1], experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
inputs, (detail,) = np.load(sys.argv[2]), interpreter.get_input_details()
if len(detail["shape"]) and detail["shape"][0] != 1:  # one sample at a time, whatever batch the file declares (as ours)
    interpreter.resize_tensor_input(detail["index"], [1, *detail["shape"][1:]])
interpreter.allocate_tensors()
outputs = []
for sample in inputs:
    interpreter.set_tensor(detail["index"], sample[None].astype(detail["dtype"]))
    interpreter.invoke()
    outputs.append(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).copy())
np.save(sys.argv[3], np.stack(outputs))
"""


def _mutated(data: bytes, draw) -> bytes | None:
    """The file with one field changed (None where the drawn change does not apply to it or packs to no file)."""
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    graph = model.subgraphs[0]
    operator, kind = graph.operators[0], draw(st.sampled_from(["option", "shape", "type", "input", "buffer", "scale", "zero_point"]))
    tensor = graph.tensors[draw(st.integers(0, len(graph.tensors) - 1))]
    quantization = tensor.quantization
    if kind == "option":
        options = operator.builtinOptions
        names = sorted(name for name, value in vars(options).items() if not isinstance(value, (list, np.ndarray))) if options else []
        if not names:
            return None
        name = draw(st.sampled_from(names))
        old = getattr(options, name)
        setattr(options, name, (not old) if isinstance(old, bool) else draw(st.sampled_from(FLOATS if isinstance(old, float) else INTS)))
    elif kind == "shape":
        if tensor.shape is None or len(tensor.shape) == 0:
            return None
        tensor.shape = list(tensor.shape)
        tensor.shape[draw(st.integers(0, len(tensor.shape) - 1))] = draw(st.sampled_from([0, 1, 2, 3, 5, -1, 2**20]))
    elif kind == "type":
        tensor.type = draw(st.sampled_from(sorted(TYPES)))
    elif kind == "input":
        operator.inputs = list(operator.inputs)
        operator.inputs[draw(st.integers(0, len(operator.inputs) - 1))] = draw(st.sampled_from([-1, 0, 1, 2, len(graph.tensors)]))
    elif kind == "buffer":
        buffer = model.buffers[tensor.buffer]
        if buffer.data is None or len(buffer.data) == 0:
            return None
        buffer.data = buffer.data[: len(buffer.data) // 2]
    else:
        if quantization is None or quantization.scale is None or len(quantization.scale) == 0:
            return None
        if kind == "scale":
            quantization.scale = [draw(st.sampled_from(FLOATS)), *list(quantization.scale)[1:]]
        else:
            quantization.zeroPoint = [draw(st.sampled_from([-129, 128, 300, -(2**31)])), *list(quantization.zeroPoint)[1:]]
    try:
        return bytes(flatbuffer_utils.convert_object_to_bytearray(model))
    except (TypeError, ValueError, OverflowError):  # a value the field's type cannot hold: no file
        return None


def _inputs_as_declared(data: bytes, inputs: np.ndarray) -> np.ndarray:
    """The case's inputs in the shape and type the (mutated) file declares for its input: a data set that does not fit the
    model is the data's problem, not the reader's."""
    graph = flatbuffer_utils.convert_bytearray_to_object(bytearray(data)).subgraphs[0]
    if graph.inputs is None or len(graph.inputs) == 0 or not 0 <= graph.inputs[0] < len(graph.tensors):
        return inputs
    tensor = graph.tensors[graph.inputs[0]]
    shape = tuple(int(dim) for dim in (tensor.shape if tensor.shape is not None else [])[1:])
    if shape and all(dim > 0 for dim in shape) and math.prod(shape) < 2**16 and tuple(inputs.shape[1:]) != shape:
        inputs = np.resize(inputs, (len(inputs), *shape))
    return inputs.astype(TYPES.get(tensor.type, inputs.dtype))


def _litert(path: Path, inputs: np.ndarray) -> tuple[np.ndarray | None, str]:
    np.save(inputs_file := path.with_suffix(".inputs.npy"), inputs)
    output_file = path.with_suffix(".output.npy")
    ran = subprocess.run([sys.executable, "-c", LITERT, str(path), str(inputs_file), str(output_file)], capture_output=True, text=True,
                         timeout=300)
    if ran.returncode != 0:
        return None, (ran.stderr.strip().splitlines() or [f"killed by signal {-ran.returncode}"])[-1]
    return np.load(output_file), ""


def _ours(path: Path, inputs: np.ndarray) -> np.ndarray:
    """The import path: the reader, its TensorFlow graph, the IR, the kernels."""
    model = read_tflite(path)
    tflite_graph_def(model)
    ir_of_tflite(model, runtime=RUNTIME)
    return run_int8(model, inputs, RUNTIME)[model.outputs[0]]


@FUZZ
@given(operator=st.sampled_from(sorted(CASES)), draw=st.data())
def test_the_reader_refuses_what_litert_refuses_and_computes_what_it_runs(tmp_path_factory, operator, draw):
    data, inputs = CASES[operator](Cell(0, 8))
    mutated = _mutated(data, draw.draw)
    if mutated is None:
        return
    path = tmp_path_factory.mktemp("fuzz") / "mutated.tflite"
    path.write_bytes(mutated)
    inputs = _inputs_as_declared(mutated, inputs)
    theirs, refusal = _litert(path, inputs)
    try:
        ours = _ours(path, inputs)
    except (TfliteError, IrError) as error:
        assert str(path) in str(error) or "operator" in str(error), f"{operator}: a refusal that names neither the file nor the operator: {error}"
        return
    assert theirs is not None, f"{operator}: read green where LiteRT refuses the file ({refusal})"
    assert ours.size == theirs.size and np.array_equal(ours.ravel(), theirs.ravel()), \
        f"{operator}: {np.count_nonzero(ours.ravel() != theirs.ravel()) if ours.size == theirs.size else 'a different number of'} bytes differ from LiteRT's"


def test_an_unmutated_file_of_every_case_runs_on_both_to_the_same_bytes(tmp_path):
    """The property's other side: the base files are read green and computed as LiteRT computes them."""
    for operator in ("CONV_2D", "SOFTMAX", "PADV2"):
        data, inputs = CASES[operator](Cell(0, 8))
        (path := tmp_path / f"{operator}.tflite").write_bytes(data)
        theirs, refusal = _litert(path, inputs)
        assert theirs is not None, refusal
        assert np.array_equal(_ours(path, inputs).ravel(), theirs.ravel()), operator
