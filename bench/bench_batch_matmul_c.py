"""The generated C of batch_matmul in its two loop orders, side by side in one process, on attention's shapes:

    .venv/bin/python bench/bench_batch_matmul_c.py [--cflags=-O2] [--budget-s 0.2]

core/backends/c/ops/batch_matmul.py writes one int64 sum per output element with k innermost (dot_products_c) where
the second operand runs along k (adj_y: queries by keys), and a row of sums with the columns innermost
(rows_of_sums_c) where it runs along the columns (probabilities by values). Each order is compiled for each shape as
a program runs a layer (a static function called from an external one on one arena), checked against the kernel
(core/ir/ops/batch_matmul/kernel.py) on random int8 operands, and timed by its own clock; prints per shape each
order's microseconds per call, whether its bytes are the kernel's, the ratio, and the order the emitter takes. GCC
12.2 at -O2 computes probabilities by values of MiT's shape (depth 4, 16 columns) wrongly in the dot-product order."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the project, beside which bench/ lies

from core.backends.c.build import compiler_command  # noqa: E402
from core.backends.c.ops.batch_matmul import batch_matmul_emit_c, dot_products_c, rows_of_sums_c
from core.backends.c.program import ARENA_ALIGN, RUNTIME_HEADERS
from core.ir.ops.batch_matmul.kernel import batch_matmul_kernel
from core.ir.ops.batch_matmul.record import BatchMatMulLayer
from core.quantize.tflite_math import quantize_multiplier

# (what, first operand, second operand, adj_y): one image's shapes, heads first
SHAPES = [("MiT probabilities x values", [2, 16, 4], [2, 4, 16], False),
          ("probabilities x values", [4, 64, 64], [4, 64, 32], False),
          ("queries x keys", [4, 64, 32], [4, 64, 32], True),
          ("ViT-S queries x keys", [6, 197, 64], [6, 197, 64], True),
          ("ViT-S probabilities x values", [6, 197, 197], [6, 197, 64], False)]
ORDERS = {"dot products": dot_products_c, "rows of sums": rows_of_sums_c}


def record(first: list[int], second: list[int], adj_y: bool) -> BatchMatMulLayer:
    multiplier, shift = quantize_multiplier(0.02 * 0.05 / 0.3)
    output = [first[0], first[1], second[1] if adj_y else second[2]]
    return BatchMatMulLayer.from_json({"name": "bmm", "operation": "batch_matmul", "scheme": "tflite_int8", "input_shapes": [first, second],
                              "output_shape": output, "adj_x": False, "adj_y": adj_y, "input_scales": [0.02, 0.05],
                              "input_zero_points": [-128, 3], "multiplier": multiplier, "shift": shift, "output_scale": 0.3,
                              "output_zero_point": -9, "output_min": -128, "output_max": 127, "previous_layer": ["a", "b"],
                              "next_layer": []})


def driver(function_c: str, sizes: list[int]) -> str:
    """The layer's function called as run_network calls it, `repeats` times (argv[1]), on operands read from stdin."""
    offsets = np.cumsum([0, *(-(-size // ARENA_ALIGN) * ARENA_ALIGN for size in sizes)])  # out, in0, in1
    return f"""#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c99 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "qt_runtime.h"
{function_c}
static int8_t arena[{offsets[-1]}];
void run_layer(void);
void run_layer(void) {{ layer_bmm(arena + {offsets[1]}, arena + {offsets[2]}, arena); }}
int main(int argc, char **argv)
{{
    long repeat, repeats = argc > 1 ? atol(argv[1]) : 1;
    struct timespec start, end;
    if (fread(arena + {offsets[1]}, 1, {sizes[1]}, stdin) != {sizes[1]} || fread(arena + {offsets[2]}, 1, {sizes[2]}, stdin) != {sizes[2]})
        return 1;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (repeat = 0; repeat < repeats; repeat++)
        run_layer();
    clock_gettime(CLOCK_MONOTONIC, &end);
    fprintf(stderr, "%.9f\\n", (end.tv_sec - start.tv_sec) + 1e-9 * (end.tv_nsec - start.tv_nsec));
    fwrite(arena, 1, {sizes[0]}, stdout);
    return 0;
}}
"""


def timed(source: str, work: Path, name: str, operands: bytes, cflags: list[str], budget_s: float) -> tuple[float, np.ndarray]:
    """(seconds per call, the output bytes) of the driver, its repeats chosen to fill about `budget_s`."""
    (work / f"{name}.c").write_text(source)
    subprocess.run([*compiler_command(cflags), "-o", str(work / name), f"{name}.c"], cwd=work, check=True)
    once = subprocess.run([str(work / name), "1"], input=operands, capture_output=True, check=True)
    repeats = max(1, int(budget_s / max(float(once.stderr), 1e-7)))
    run = subprocess.run([str(work / name), str(repeats)], input=operands, capture_output=True, check=True)
    return float(run.stderr) / repeats, np.frombuffer(run.stdout, np.int8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cflags", default="-O2", help="the C compiler's flags, as codegen.cflags (space-separated)")
    parser.add_argument("--budget-s", type=float, default=0.2, help="seconds of timing per order and shape")
    arguments = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"cc {arguments.cflags}: microseconds per call, and whether the bytes are the kernel's")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        for header in RUNTIME_HEADERS:
            (work / header.name).write_text(header.read_text())
        for what, first, second, adj_y in SHAPES:
            layer = record(first, second, adj_y)
            operands = [rng.integers(-128, 128, (1, *shape)).astype(np.int8) for shape in (first, second)]
            expected = batch_matmul_kernel(layer, {}, operands).reshape(-1)
            sizes = [math.prod(layer.output_shape), *(math.prod(shape) for shape in (first, second))]
            results = {}
            for order, loops in ORDERS.items():
                declarations, body = loops(layer, "layer_bmm")
                function_c = f"{declarations}static void layer_bmm(const int8_t *restrict in0, const int8_t *restrict in1, int8_t *restrict out)\n{{\n{body}\n}}\n"
                seconds, output = timed(driver(function_c, sizes), work, order.replace(" ", "_"), b"".join(x.tobytes() for x in operands),
                                        arguments.cflags.split(), arguments.budget_s)
                results[order] = (seconds, bool(np.array_equal(output, expected)))
            taken = "rows of sums" if "layer_bmm_sums[" in batch_matmul_emit_c(layer, "layer_bmm") else "dot products"
            cells = ", ".join(f"{order} {seconds * 1e6:.1f} us ({'exact' if exact else 'WRONG'})" for order, (seconds, exact) in results.items())
            ratio = results["dot products"][0] / results["rows of sums"][0]
            print(f"{what} {first} x {second}{' (adj_y)' if adj_y else ''}: {cells}; dot / rows {ratio:.2f}x; the emitter takes {taken}")


if __name__ == "__main__":
    main()
