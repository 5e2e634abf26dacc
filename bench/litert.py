"""Timing TensorFlow Lite's interpreter (LiteRT) as the benchmarks compare against it: one thread, one image per
invoke, the invokes alone timed."""

from __future__ import annotations

import time

from ai_edge_litert.interpreter import Interpreter, OpResolverType
import numpy as np


def time_tflite(model: bytes, images: np.ndarray, repeats: int, xnnpack: bool) -> tuple[float, np.ndarray]:
    """Best-of-`repeats` seconds per image of invoke() (set_tensor excluded), one thread."""
    resolver = (OpResolverType.AUTO if xnnpack
                else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interpreter = Interpreter(model_content=model, num_threads=1, experimental_op_resolver_type=resolver)
    interpreter.allocate_tensors()
    input_index = interpreter.get_input_details()[0]["index"]
    output_index = interpreter.get_output_details()[0]["index"]
    outputs = []
    for image in images:  # warm-up, and the outputs
        interpreter.set_tensor(input_index, image[np.newaxis])
        interpreter.invoke()
        outputs.append(interpreter.get_tensor(output_index).reshape(-1))
    best = float("inf")
    for _ in range(repeats):
        total = 0.0
        for image in images:
            interpreter.set_tensor(input_index, image[np.newaxis])
            started = time.perf_counter()
            interpreter.invoke()
            total += time.perf_counter() - started
        best = min(best, total / len(images))
    return best, np.stack(outputs)
