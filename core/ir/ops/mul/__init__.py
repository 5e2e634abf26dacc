"""mul (a TF2IR extension): the element-wise product of two activations with broadcasting
(squeeze-excitation), one rounding shift, an optional fused activation. The annotated graph
computes the same integers (its integer model)."""

from core.frontend.layers import AnnotateRule, IntegerModelBuilder, QKind
from core.ir.activations import activation_named
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.mul.affine_record import MulAffineLayer, mul_affine_kernel, mul_from_tflite
from core.ir.ops.mul.emit import mul_fields
from core.ir.ops.mul.kernel import mul_kernel
from core.ir.ops.mul.pattern import PATTERN
from core.ir.ops.mul.record import MulLayer


def mul_model(model: IntegerModelBuilder) -> str:
    ints = [model.to_ints(tensor, scale) for tensor, scale in zip(model.inputs, model.input_log2scales)]
    shift = sum(model.input_log2scales) - model.output_log2scale
    product = model.round_shift(model.op("Mul", ints), shift)
    low, high = activation_named(model.layer.activation).clamp(model.output_log2scale)
    return model.from_ints(model.clamp(product, low, high), model.output_log2scale)


MUL = register_op(IrOp("mul", MulLayer,
                       AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION, integer_model=mul_model),
                       (PATTERN,), mul_fields, mul_kernel, input_kinds=("input0", "input1")))
MUL_AFFINE = register_affine_op(AffineOp("mul", MulAffineLayer, mul_affine_kernel, {"MUL": mul_from_tflite}, ("constant",),
                                         input_kinds=("input0", "input1")))
