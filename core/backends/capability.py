"""What each IR dialect takes of a model, asked before calibration (`refusal`: why a dialect at a width cannot take a
layer), derived from the registries rather than written beside them: the IR operations (core/ir/ops: their dialects,
the widths their arithmetic has) and the .tflite writers (the operators each writes, read back at that width). It
imports neither backend's code generator, so that a stage asking it is not re-keyed by an edit of the C or the
accelerator; the README's table of operations x targets (operations_table.py) adds those."""

from __future__ import annotations

from typing import Callable

from core.backends.tflite.ops import refusal as tflite_refusal
from core.frontend.layers import Layer
from core.ir.ops import OPS
from core.quantize.runtimes import Runtime


def tf2ir_operation_refusal(operation: str) -> str | None:
    """TF2IR's power-of-two IR takes every operation of its dialect at any of its layers (an element-wise function of
    any kind: a table; tests/test_structure.py: both backends cover every operation)."""
    op = OPS.get(operation)
    return None if op is not None and "tf2ir" in op.record.dialects else f"the TF2IR IR has no {operation} operation"


def tf2ir_refusal(layer: Layer, bits: int, runtime: Runtime | None = None) -> str | None:
    return tf2ir_operation_refusal(layer.op)


# why a dialect (a scheme's `ir_dialect`) at a width, on a runtime where given, cannot take a layer, or None
REFUSALS: dict[str, Callable[[Layer, int, Runtime | None], str | None]] = {"tf2ir": tf2ir_refusal, "tflite_int8": tflite_refusal}


def refusal(dialect: str, layer: Layer, bits: int, runtime: Runtime | None = None) -> str | None:
    return REFUSALS[dialect](layer, bits, runtime)
