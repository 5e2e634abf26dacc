"""TensorFlow Lite's reference kernels as the reference path of the tflite_int8 scheme, the way
TensorFlow is the float one: a `.tflite` model run by LiteRT's interpreter (ai-edge-litert, the package
TensorFlow 2.21 deprecates tf.lite.Interpreter in favour of) with the BUILTIN_REF op resolver (TFLite's
reference_ops / reference_integer_ops, not the optimized or XNNPACK kernels), every intermediate tensor
kept, so the simulator and the generated C can be compared with it tensor by tensor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType


def reference_interpreter(model: Path | bytes, batch: int) -> Interpreter:
    """An interpreter of `model` (a path or the file's bytes) on the reference kernels, its input
    resized to `batch` images and every tensor preserved."""
    source = {"model_content": bytes(model)} if isinstance(model, (bytes, bytearray)) else {"model_path": str(model)}
    interpreter = Interpreter(**source, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                              experimental_preserve_all_tensors=True, num_threads=1)
    detail = interpreter.get_input_details()[0]
    interpreter.resize_tensor_input(detail["index"], [batch, *detail["shape"][1:]], strict=False)
    interpreter.allocate_tensors()
    return interpreter


def reference_tensors(model: Path | bytes, inputs: np.ndarray) -> dict[int, np.ndarray]:
    """Every tensor of `model` (by index) after the reference kernels ran on `inputs` (a batch in the
    model's input type)."""
    return ReferenceRunner(model).tensors(inputs)


class ReferenceRunner:
    """The reference kernels on batch after batch of one model: the file read once, an interpreter kept while
    the batch size stays the same (simulate's batches: all but the last)."""

    def __init__(self, model: Path | bytes):
        self.model = bytes(model) if isinstance(model, (bytes, bytearray)) else Path(model).read_bytes()
        self.interpreter: Interpreter | None = None
        self.batch = 0

    def tensors(self, inputs: np.ndarray) -> dict[int, np.ndarray]:
        """Every tensor (by index) after the reference kernels ran on `inputs`."""
        if self.interpreter is None or self.batch != len(inputs):
            self.interpreter, self.batch = reference_interpreter(self.model, len(inputs)), len(inputs)
        interpreter = self.interpreter
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs)
        interpreter.invoke()
        values = {}
        for detail in interpreter.get_tensor_details():
            try:
                values[detail["index"]] = np.array(interpreter.get_tensor(detail["index"]))
            except ValueError:  # a tensor without data (an optional input left out)
                continue
        return values
