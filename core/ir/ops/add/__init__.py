"""add (seed 000, 4.2 ADD): the element-wise sum of two activations, with its activation
(pattern.py), its typed record (record.py), its fields (emit.py) and kernel (kernel.py). Its two
roundings (the finer operand aligned, then the sum moved to the output scale) are in the
annotated graph too (its integer model), so the two agree bit for bit whatever the scales."""

from core.frontend.layers import AnnotateRule, IntegerModelBuilder, QKind
from core.ir.activations import activation_named
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.add.affine_record import AddAffineLayer, add_affine_kernel, add_from_tflite
from core.ir.ops.add.emit import add_fields
from core.ir.ops.add.kernel import add_kernel
from core.ir.ops.add.pattern import PATTERN
from core.ir.ops.add.record import AddLayer


def add_model(model: IntegerModelBuilder) -> str:
    """add_kernel's steps 1-5 on the operands' integers."""
    scales, output = model.input_log2scales, model.output_log2scale
    coarse = min(scales)
    aligned = [model.round_shift(model.to_ints(tensor, scale), scale - coarse) for tensor, scale in zip(model.inputs, scales)]
    total = model.round_shift(model.op("AddV2", aligned), coarse - output)
    low, high = activation_named(model.layer.activation).clamp(output)
    return model.from_ints(model.clamp(total, low, high), output)


ADD = register_op(IrOp("add", AddLayer,
                       AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION, integer_model=add_model),
                       (PATTERN,), add_fields, add_kernel, input_kinds=("pl", "add")))
ADD_AFFINE = register_affine_op(AffineOp("add", AddAffineLayer, add_affine_kernel, {"ADD": add_from_tflite}, input_kinds=("pl", "add")))
