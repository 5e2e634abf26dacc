"""The generated C network vs TensorFlow Lite's int8 interpreter, single-threaded, same model.

    .venv/bin/python bench/bench_codegen.py [--images 100] [--repeats 5]

Builds the TF2IR IR of mbv1_cifar10 (../shared) with its own QAT ranges, generates and
compiles the C program exactly as the codegen stage does, twice: with the default
codegen.cflags (-O2: a binary for any x86-64) and with codegen.cflags=[-O3, -march=native] (this
host's AVX2 / AVX-512 VNNI int8 microkernels, core/backends/c/runtime/qt_gemm.h); checks both
against the integer simulator, and times run_network per image (the binary's own clock, best of
`repeats` runs over the images). The budget applies to the host build. Then converts the same QAT frozen graph
with TFLite's converter (inference_type int8, input quantized with scale 2^-7 = the IR's
input_log2scale, so both take the same int8 images) and times Interpreter.invoke per image
with num_threads=1: with the default XNNPACK delegate, and with TFLite's built-in kernels
only. Prints both latencies and the ratio; the budget is 2x TFLite (XNNPACK).

TFLite conversion, as found with TF 2.21: `from_frozen_graph` on the QAT graph as shipped
gives a model whose CONV_2D / DEPTHWISE_CONV_2D run in float between QUANTIZE/DEQUANTIZE
pairs (the weights' FakeQuant reads BN-folding arithmetic, which the converter folds into a
float constant, and the biases carry 8-bit FakeQuants, which TFLite cannot use: it wants
int32 biases at input scale x weight scale). The benchmark therefore converts the same
graph after the project's own constant folding (core.frontend.folding: weights become constants
feeding their FakeQuant) with the bias FakeQuants bypassed (TFLite requantizes the float
bias to int32 itself); the result is checked to be int8 throughout (every conv's weight int8).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402
import numpy as np
from mbv1 import END_POINT, MBV1, cifar_images, float_graph, qat_graph  # the real model and data, from ../shared
from litert import time_tflite  # noqa: E402

from core.quantize.calibration.methods import CalibrationSettings
from core.quantize.calibration.build import TargetSpec, build_calibration_table
from core.quantize.schemes import Pow2Symmetric
from core.backends.c.build import INT8_SIMD_PATHS, compile_program, compiler_command, run_program
from core.backends.program import generate_c
from core.frontend.constant_folding import fold_constants
from core.frontend.folding import fold_batch_norms
from core.ir.emit import build_ir
from core.ir.layers import group_layers
from core.ir.fixedpoint import quantize
from core.ir.simulator import IntegerSimulator

BUDGET = 2.0
HOST_CFLAGS = ("-O3", "-march=native")
TFLITE_INPUT = "images"


def build_program(work: Path):
    qat = qat_graph()
    folded_float, ranges = float_graph(qat)
    layer_graph = group_layers(folded_float)
    table = build_calibration_table(layer_graph, "qat", TargetSpec("tf2ir", Pow2Symmetric(input_log2scale=7)), CalibrationSettings(), None, ranges)
    ir = build_ir(layer_graph, table)
    program = generate_c(ir)
    program_c = program.write(work)
    started = time.perf_counter()
    binary = compile_program(program_c)
    compile_s = time.perf_counter() - started
    host_binary = compile_program(program_c, work / "network_host", compiler=compiler_command(HOST_CFLAGS))
    return qat, ir, program, (binary, host_binary), compile_s


def tflite_from_frozen_graph(path: Path, label: str):
    import tensorflow as tf

    converter = tf.compat.v1.lite.TFLiteConverter.from_frozen_graph(
        str(path), [TFLITE_INPUT], [END_POINT.split(":")[0]], input_shapes={TFLITE_INPUT: [1, 128, 128, 3]})
    converter.inference_type = tf.int8
    converter.quantized_input_stats = {TFLITE_INPUT: (0.0, 128.0)}  # real = (q - 0) / 128: the IR's input_log2scale 7
    try:
        return converter.convert(), None
    except Exception as error:  # noqa: BLE001  (reported, not hidden)
        return None, f"{label}: {type(error).__name__}: {error}"


def op_mix(model: bytes) -> tuple[Counter, bool]:
    """The model's operators, and whether every conv runs on int8 (int8 input and weight)."""
    interpreter = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interpreter.allocate_tensors()
    tensors = {detail["index"]: detail for detail in interpreter.get_tensor_details()}
    ops = interpreter._get_ops_details()
    convs = [op for op in ops if op["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    int8 = bool(convs) and all(tensors[op["inputs"][i]]["dtype"] == np.int8 for op in convs for i in (0, 1))
    return Counter(op["op_name"] for op in ops), int8


def folded_qat_graph_def(qat, path: Path) -> None:
    """The QAT graph after core.frontend.folding, with every bias FakeQuant bypassed, as a frozen GraphDef."""
    graph_def = fold_batch_norms(fold_constants(qat)).graph.to_graph_def()
    bypass = {node.name: node.input[0] for node in graph_def.node
              if node.op.startswith("FakeQuantWithMinMaxVars") and "bias_quant" in node.name}
    for node in graph_def.node:
        for position, name in enumerate(node.input):
            if name in bypass:
                node.input[position] = bypass[name]
    kept = [node for node in graph_def.node if node.name not in bypass]
    del graph_def.node[:]
    graph_def.node.extend(kept)
    path.write_bytes(graph_def.SerializeToString())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-codegen-") as work:
        work = Path(work)
        qat, ir, program, binaries, compile_s = build_program(work)
        images = quantize(cifar_images("test_batch", args.images), ir.input_log2scale)
        (end_point,) = program.end_points
        expected = IntegerSimulator(ir).run_int8(images)[end_point]
        c_seconds, paths = [], []
        for binary in binaries:
            runs = [run_program(binary, program, images, work / "run") for _ in range(args.repeats)]
            if not all(np.array_equal(run.outputs[end_point], expected) for run in runs):
                print(f"{binary.name}: the generated C differs from the integer simulator: not timing a wrong program")
                return 1
            c_seconds.append(min(run.seconds for run in runs) / len(images))
            paths.append(INT8_SIMD_PATHS[runs[0].int8_simd])

        as_shipped, failure = tflite_from_frozen_graph(MBV1, "the QAT frozen graph as shipped")
        if as_shipped is not None:
            ops, int8 = op_mix(as_shipped)
            print(f"TFLite from the QAT frozen graph as shipped: {'int8' if int8 else 'NOT int8 (float convs)'}; ops {dict(ops)}")
        else:
            print(f"TFLite conversion failed: {failure}")
        folded_path = work / "qat_folded.pb"
        folded_qat_graph_def(qat, folded_path)
        model, failure = tflite_from_frozen_graph(folded_path, "the folded QAT graph")
        if model is None:
            print(f"TFLite conversion failed: {failure}; no int8 TFLite baseline")
            return 1
        ops, int8 = op_mix(model)
        print(f"TFLite from the folded QAT graph, bias FakeQuants bypassed: {'int8' if int8 else 'NOT int8'}; ops {dict(ops)}")
        if not int8:
            print("no int8 TFLite model: no baseline")
            return 1
        xnnpack_seconds, tflite_out = time_tflite(model, images, args.repeats, xnnpack=True)
        builtin_seconds, _ = time_tflite(model, images, args.repeats, xnnpack=False)

    agree = float(np.mean(tflite_out.argmax(axis=1) == expected.reshape(len(images), -1).argmax(axis=1)))
    default_s, host_s = c_seconds
    ratio = host_s / xnnpack_seconds
    print(f"mbv1_cifar10 (QAT IR), {len(images)} CIFAR-10 test images, single thread, best of {args.repeats}; "
          f"both C builds bit-exact with the simulator")
    print(f"generated C, default cflags -O2 ({paths[0]}; compiled in {compile_s:.1f} s):  {1000 * default_s:7.3f} ms / image")
    print(f"generated C, cflags {' '.join(HOST_CFLAGS)} ({paths[1]}):      {1000 * host_s:7.3f} ms / image")
    print(f"TFLite int8, XNNPACK delegate (default):                  {1000 * xnnpack_seconds:7.3f} ms / image")
    print(f"TFLite int8, built-in kernels only:                       {1000 * builtin_seconds:7.3f} ms / image")
    print(f"ratio C({' '.join(HOST_CFLAGS)}) / TFLite(XNNPACK) {ratio:.2f} (budget {BUDGET}); default cflags "
          f"{default_s / xnnpack_seconds:.2f}; C / TFLite(built-in) {host_s / builtin_seconds:.2f}")
    print(f"top-1 agreement C vs TFLite: {agree:.3f} (TFLite rounds differently: not bit-exact by design)")
    return 0 if ratio <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
