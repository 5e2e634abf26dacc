"""mul (a TF2IR extension): the element-wise product of two activations with broadcasting
(squeeze-excitation), one rounding shift, an optional fused activation, defined once as its integer model (kernel.py): the annotated graph
computes it as graph ops, the simulator as its kernel. One record of both dialects: the tflite_int8 dialect's (a .tflite's
MUL, tflite.py) computes TFLite's arithmetic: one definition of both, kernel.py's mul_arithmetic, with each record's
requantization."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.mul.emit import mul_fields
from core.ir.ops.mul.kernel import mul_kernel, mul_model
from core.ir.ops.mul.pattern import PATTERN
from core.ir.ops.mul.record import MulLayer
from core.ir.ops.mul.tflite import mul_from_tflite


MUL = register_op(IrOp("mul", MulLayer,
                       AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION, integer_model=mul_model, carries_tails=True),
                       (PATTERN,), mul_fields, mul_kernel, input_kinds=("input0", "input1"),
                       param_kinds=("constant",),  # the tflite_int8 dialect's constant second factor, where load_constant
                       builders={"MUL": mul_from_tflite}, activation_widths=(8, 16)))
