"""lut (a TF2IR extension): any element-wise int8 -> int8 function of one activation as a
256-entry table -- LeakyRelu, Sigmoid, Tanh, hard-swish, swish and whatever else Keras writes as
element-wise ops with scalar constants (pattern.py). On a power-of-two target the annotated
graph reads the same table (its integer model), so it agrees with the IR bit for bit. In the tflite_int8 dialect
(tflite.py): a .tflite's LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU or int8 -> int8 QUANTIZE as the table of what the
runtime's kernel gives for each input; on int16 (TFLite's 16x8 mode) LOGISTIC, TANH, MAXIMUM, MINIMUM, RSQRT and GELU
by their kernels' arithmetic (int16.py)."""

from core.frontend.layers import AnnotateRule, IntegerModelBuilder, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.lut.emit import lut_fields, lut_params
from core.ir.ops.lut.int16 import FUNCTIONS as INT16_FUNCTIONS
from core.ir.ops.lut.kernel import lut_kernel
from core.ir.ops.lut.pattern import PATTERN
from core.ir.ops.lut.record import TABLE_SIZE, TFLITE_FUNCTIONS, LutLayer
from core.ir.ops.lut.tflite import TABLES, lut_from_tflite
from core.quantize.integers import lookup_table


def lut_model(model: IntegerModelBuilder) -> str:
    """table[q + 128] gathered at the input's integers q."""
    layer = model.layer
    table = lookup_table(model.graph, layer.nodes, layer.inputs[0], layer.output, model.input_log2scales[0],
                         model.output_log2scale)
    index = model.op("Cast", [model.op("AddV2", [model.to_ints(model.inputs[0], model.input_log2scales[0]),
                                                 model.const("offset", TABLE_SIZE // 2)])], cast_to="int32")
    values = model.op("GatherV2", [model.const("table", table.astype("float32")), index, model.const("axis", 0, "int32")])
    return model.from_ints(values, model.output_log2scale)


if set(TABLES) != set(TFLITE_FUNCTIONS):
    raise ValueError(f"lut: the TFLite operators with a table ({sorted(TABLES)}) are not the record's functions ({TFLITE_FUNCTIONS})")
LUT = register_op(IrOp("lut", LutLayer, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION, integer_model=lut_model, carries_tails=True),
                       (PATTERN,), lut_fields, lut_kernel, lut_params, param_kinds=("table",),
                       builders={name: lut_from_tflite for name in TABLES},
                       builder_widths={name: (8, 16) for name in INT16_FUNCTIONS}))
