"""mul (a TF2IR extension): the element-wise product of two activations with broadcasting
(squeeze-excitation), one rounding shift, an optional fused activation, defined once as its integer model (kernel.py): the annotated graph
computes it as graph ops, the simulator as its kernel."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.mul.affine_record import MulAffineLayer, mul_affine_kernel, mul_from_tflite
from core.ir.ops.mul.emit import mul_fields
from core.ir.integer_kernel import integer_model_kernel
from core.ir.ops.mul.kernel import mul_model
from core.ir.ops.mul.pattern import PATTERN
from core.ir.ops.mul.record import MulLayer


MUL = register_op(IrOp("mul", MulLayer,
                       AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION, integer_model=mul_model),
                       (PATTERN,), mul_fields, integer_model_kernel(mul_model), input_kinds=("input0", "input1")))
MUL_AFFINE = register_affine_op(AffineOp("mul", MulAffineLayer, mul_affine_kernel, {"MUL": mul_from_tflite}, ("constant",),
                                         input_kinds=("input0", "input1")))
