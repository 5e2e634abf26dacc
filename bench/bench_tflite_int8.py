"""The tflite_int8 scheme's integer kernels against TensorFlow's float inference of the same model and
against TensorFlow Lite itself, side by side in one process, on MLPerf Tiny's ResNet-8 (../shared).

    .venv/bin/python bench/bench_tflite_int8.py [--images 846] [--repeats 5]

Times the CIFAR-10 test images through (a) the float Keras model (pretrainedResnet.h5) run by
TensorFlow, (b) MLCommons' int8 .tflite read as the tflite_int8 IR (core/ir/tflite_ir.py) and run by the
integer simulator, as the simulate stage runs it, (c) the same file in LiteRT's interpreter with its
default kernels (XNNPACK) on one thread, the whole batch in one invoke and (c') one image per invoke (the
invokes timed, best of --repeats), (d) with its reference kernels (BUILTIN_REF), each warmed up, the median
of --repeats; and (e) the C program codegen generates from that IR, built with -O3 -march=native, one thread,
one image after another (its own clock around run_network, best of --repeats runs). Checks that (b) and (e)
give every output byte (d) gives. Budgets: the simulator 1.5x (a); the C 1.2x (c'), image by image as both
run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from conftest import CIFAR10_DIR, MODELS  # noqa: E402
from core.data.datasets import load_cifar10  # noqa: E402
from core.backends.accel.partition import partition  # noqa: E402
from core.backends.c.build import compile_program, run_program  # noqa: E402
from core.backends.program import generate_program  # noqa: E402
from core.frontend.tflite import read_tflite  # noqa: E402
from core.ir.simulator import IntegerSimulator  # noqa: E402
from core.ir.tflite_ir import ir_of_tflite  # noqa: E402
from litert import time_tflite  # noqa: E402  (bench/litert.py)
from tables import publish  # noqa: E402  (bench/tables.py)

RESNET8 = MODELS / "mlperf_tiny_resnet8"
BUDGET = 1.5
C_BUDGET = 1.2
C_FLAGS = ("cc", "-O3", "-march=native", "-std=c99", "-Wall", "-Werror", "-ffp-contract=off")


def c_seconds(ir, inputs: np.ndarray, repeats: int, work: Path) -> tuple[float, np.ndarray]:
    """The generated program's best time over `inputs` (run_network only) and its end point."""
    program = generate_program(ir, partition(ir, None, "tflite_int8"))
    binary = compile_program(program.write(work), work / "network", compiler=C_FLAGS)
    runs = [run_program(binary, program, inputs, work / "run") for _ in range(repeats)]
    (end_point,) = program.end_points
    return min(run.seconds for run in runs), runs[0].outputs[end_point].reshape(len(inputs), -1)


def median_of(repeats: int, function) -> float:
    function()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def tflite_runner(path: Path, inputs: np.ndarray, resolver):
    interpreter = Interpreter(model_path=str(path), num_threads=1, experimental_op_resolver_type=resolver)
    source, sink = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    interpreter.resize_tensor_input(source["index"], inputs.shape)
    interpreter.allocate_tensors()

    def run() -> np.ndarray:
        interpreter.set_tensor(source["index"], inputs)
        interpreter.invoke()
        return interpreter.get_tensor(sink["index"])
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=846)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "bench_tflite_int8.md")
    args = parser.parse_args()
    if not (CIFAR10_DIR.is_dir() and RESNET8.is_dir()):
        sys.exit(f"needs {CIFAR10_DIR} and {RESNET8}")
    images, _ = load_cifar10(CIFAR10_DIR, "test_batch")
    images = images[: args.images]
    pixels, int8_inputs = images.astype(np.float32), (images.astype(np.int16) - 128).astype(np.int8)
    path = RESNET8 / "pretrainedResnet_quant.tflite"
    model, keras_model = read_tflite(path), tf.keras.models.load_model(RESNET8 / "pretrainedResnet.h5", compile=False)
    default, reference = (tflite_runner(path, int8_inputs, resolver) for resolver in (OpResolverType.AUTO, OpResolverType.BUILTIN_REF))
    ir = ir_of_tflite(model)
    simulator = IntegerSimulator(ir)
    (end_point,) = ir.end_point_layers
    expected = reference()
    if not np.array_equal(simulator.run_int8(int8_inputs)[end_point].reshape(expected.shape), expected):
        sys.exit("the simulator disagrees with TFLite's reference kernels")
    with tempfile.TemporaryDirectory(prefix="bench-tflite-c-") as work:
        c_best, c_outputs = c_seconds(ir, int8_inputs, args.repeats, Path(work))
    if not np.array_equal(c_outputs, expected.reshape(len(expected), -1)):
        sys.exit("the generated C disagrees with TFLite's reference kernels")
    seconds = {
        "TensorFlow float (Keras .h5)": median_of(args.repeats, lambda: keras_model(pixels, training=False)),
        "tflite_int8 simulator (ours)": median_of(args.repeats, lambda: simulator.run_int8(int8_inputs)),
        "tflite_int8 generated C (ours, -O3 -march=native), 1 thread": c_best,
        "TFLite default kernels (XNNPACK), 1 thread": median_of(args.repeats, default),
        "TFLite default kernels (XNNPACK), 1 thread, one image per invoke":
            time_tflite(path.read_bytes(), int8_inputs, args.repeats, xnnpack=True)[0] * len(int8_inputs),
        "TFLite reference kernels (BUILTIN_REF)": median_of(args.repeats, reference),
    }
    base = seconds["TensorFlow float (Keras .h5)"]
    rows = [[name, f"{value * 1e3:.0f}", f"{value / base:.2f}"] for name, value in seconds.items()]
    publish(("path", f"ms for {len(images)} images", "x TensorFlow float"), rows, args.out)
    ratio = seconds["tflite_int8 simulator (ours)"] / base
    print(f"simulator / TensorFlow float = {ratio:.2f} (budget {BUDGET}): {'within' if ratio <= BUDGET else 'OVER'}")
    c_ratio = c_best / seconds["TFLite default kernels (XNNPACK), 1 thread, one image per invoke"]
    print(f"generated C / TFLite XNNPACK, image by image = {c_ratio:.2f} (budget {C_BUDGET}): {'within' if c_ratio <= C_BUDGET else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
