"""The reference interpreters of the tflite_int8 scheme's runtimes (core/quantize/runtimes.py), the way TensorFlow
is the float one: a `.tflite` model run by the runtime's own interpreter, every operator's output kept, so the
simulator and the generated C can be compared with it tensor by tensor.

- `litert_reference`: LiteRT's interpreter (ai-edge-litert, the package TensorFlow 2.21 deprecates
  tf.lite.Interpreter in favour of) with the BUILTIN_REF op resolver (TFLite's reference_ops /
  reference_integer_ops, not the optimized or XNNPACK kernels), a batch at a time (image by image for a file whose
  kernels fix its batch: BATCH_BOUND_OPERATORS).
- `tflm`: TensorFlow Lite for Microcontrollers' interpreter (the tflite-micro package: TFLM's kernels compiled
  for the host), one image at a time as a microcontroller runs it, every tensor preserved."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from tflite_micro.python.tflite_micro import runtime as tflm

from core.frontend.tflite import TfliteModel, TfliteOperator, parse_tflite, read_tflite

# TFLM's arena for an interpreter that preserves every tensor: each computed tensor's bytes, aligned, plus room for
# the kernels' scratch buffers and the interpreter's own structures (measured: under 64 KiB on the MLPerf Tiny
# models); too small an arena makes tflite-micro's interpreter fail, or crash
TFLM_ARENA_ALIGN = 16
TFLM_ARENA_SLACK = 1 << 20
# operators whose LiteRT kernel fixes the batch the file was written with (SLICE's constant size: its Prepare refuses an
# input resized to another batch), and those that do where they read a constant (CONCATENATION's constant of a batch of one:
# a ViT's class token): a file holding one is run image by image, as a device runs it
BATCH_BOUND_OPERATORS = frozenset({"SLICE"})
BATCH_BOUND_WITH_CONSTANTS = frozenset({"CONCATENATION"})


def _binds_batch(model: TfliteModel, operator: TfliteOperator) -> bool:
    return operator.name in BATCH_BOUND_OPERATORS or operator.name in BATCH_BOUND_WITH_CONSTANTS and any(
        index >= 0 and model.tensor(index).data is not None for index in operator.inputs)


def reference_interpreter(model: Path | bytes, batch: int) -> Interpreter:
    """An interpreter of `model` (a path or the file's bytes) on the reference kernels, its input
    resized to `batch` images and every tensor preserved."""
    source = {"model_content": bytes(model)} if isinstance(model, (bytes, bytearray)) else {"model_path": str(model)}
    interpreter = Interpreter(**source, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                              experimental_preserve_all_tensors=True, num_threads=1)
    for detail in interpreter.get_input_details():
        interpreter.resize_tensor_input(detail["index"], [batch, *detail["shape"][1:]], strict=False)
    interpreter.allocate_tensors()
    return interpreter


def reference_tensors(model: Path | bytes, inputs: np.ndarray) -> dict[int, np.ndarray]:
    """Every tensor of `model` (by index) after the reference kernels ran on `inputs` (a batch in the
    model's input type)."""
    return ReferenceRunner(model).tensors(inputs)


class ReferenceRunner:
    """LiteRT's reference kernels on batch after batch of one model: the file read once, an interpreter kept while
    the batch size stays the same (simulate's batches: all but the last)."""

    def __init__(self, model: Path | bytes):
        self.model = bytes(model) if isinstance(model, (bytes, bytearray)) else Path(model).read_bytes()
        self.interpreter: Interpreter | None = None
        self.batch = 0
        parsed = parse_tflite(self.model, model if isinstance(model, Path) else "the model")
        self.per_image = any(_binds_batch(parsed, operator) for operator in parsed.operators)
        self.computed = [index for index, tensor in enumerate(parsed.tensors) if tensor.data is None]

    def tensors(self, inputs: np.ndarray | list[np.ndarray]) -> dict[int, np.ndarray]:
        """Every tensor (by index) after the reference kernels ran on `inputs` (a model of several inputs: a batch of each, in
        the file's order of its inputs)."""
        batches = inputs if isinstance(inputs, list) else [inputs]
        if self.per_image and len(batches[0]) > 1:
            images = [self.tensors([batch[image : image + 1] for batch in batches]) for image in range(len(batches[0]))]
            return {**images[0], **{index: np.concatenate([values[index] for values in images]) for index in self.computed if index in images[0]}}
        if self.interpreter is None or self.batch != len(batches[0]):
            self.interpreter, self.batch = reference_interpreter(self.model, len(batches[0])), len(batches[0])
        interpreter = self.interpreter
        for detail, batch in zip(interpreter.get_input_details(), batches, strict=True):
            interpreter.set_tensor(detail["index"], in_shape(batch, detail["shape"]))
        interpreter.invoke()
        values = {}
        for detail in interpreter.get_tensor_details():
            try:
                values[detail["index"]] = np.array(interpreter.get_tensor(detail["index"]))
            except ValueError:  # a tensor without data (an optional input left out)
                continue
        return values


class MicroRunner:
    """TensorFlow Lite for Microcontrollers' interpreter on one model: each image of a batch run as a microcontroller
    runs it (TFLM's models take one), the outputs of every operator kept (tflite-micro's kPreserveAllTensors)."""

    def __init__(self, path: Path):
        parsed = read_tflite(Path(path))
        self.outputs = [operator.outputs[0] for operator in parsed.operators]
        self.input_shapes = [parsed.tensor(index).shape for index in parsed.inputs]
        self.interpreter = tflm.Interpreter.from_bytes(Path(path).read_bytes(), arena_size=preserving_arena_bytes(parsed),
                                                       intrepreter_config=tflm.InterpreterConfig.kPreserveAllTensors)

    def tensors(self, inputs: np.ndarray | list[np.ndarray]) -> dict[int, np.ndarray]:
        """Every operator's output (by tensor index) for the batch `inputs` (a model of several inputs: a batch of each, in the
        file's order of its inputs), image by image."""
        batches = [in_shape(batch, shape) for batch, shape in zip(inputs if isinstance(inputs, list) else [inputs], self.input_shapes,
                                                                   strict=True)]
        per_image = []
        for image in range(len(batches[0])):
            for position, batch in enumerate(batches):
                self.interpreter.set_input(batch[image : image + 1], position)
            self.interpreter.invoke()
            per_image.append({index: np.array(self.interpreter.GetTensor(index, 0)["tensor_data"]) for index in self.outputs})
        return {index: np.concatenate([values[index].reshape(1, *values[index].shape[1:]) for values in per_image])
                for index in self.outputs}


def in_shape(inputs: np.ndarray, model_input_shape) -> np.ndarray:
    """A batch in the model's input shape: each image's values in row-major order, as the IR holds every tensor (a 1-D
    signal [N, L, C] is the file's image [N, 1, L, C], core/frontend/signals.py)."""
    per_image = tuple(int(dim) for dim in model_input_shape[1:])
    if inputs.shape[1:] == per_image or math.prod(inputs.shape[1:]) != math.prod(per_image):
        return inputs
    return inputs.reshape(len(inputs), *per_image)


def preserving_arena_bytes(model: TfliteModel) -> int:
    """An arena that holds every computed tensor of `model` at once, with TFLM_ARENA_SLACK for the rest."""
    computed = [tensor for tensor in model.tensors if tensor.data is None]
    sizes = [-(-math.prod(max(1, v) for v in tensor.shape) * np.dtype(tensor.numpy_dtype).itemsize // TFLM_ARENA_ALIGN) * TFLM_ARENA_ALIGN
             for tensor in computed]
    return sum(sizes) + TFLM_ARENA_SLACK


# each tflite_int8 runtime's reference interpreter (core/quantize/runtimes.py; a test keeps the two lists equal)
RUNNERS = {"litert_reference": ReferenceRunner, "tflm": MicroRunner}


def runner_of(runtime: str, path: Path):
    """The reference interpreter of `runtime` on the model at `path`: its `tensors(inputs)` gives (at least) every
    operator's output, by tensor index."""
    if runtime not in RUNNERS:
        raise ValueError(f"runtime {runtime!r} has no reference interpreter; the tflite_int8 runtimes are {', '.join(RUNNERS)}")
    return RUNNERS[runtime](path)
