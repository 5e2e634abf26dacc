"""add (seed 000, 4.2 ADD): the element-wise sum of two activations, with its activation
(pattern.py), its typed record (record.py), its fields (emit.py) and its integer arithmetic (kernel.py), defined
once as its integer model: the annotated graph computes its two roundings (the finer operand aligned, then the sum
moved to the output scale) as graph ops, the simulator as its kernel, so the two agree bit for bit whatever the scales."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.add.affine_record import AddAffineLayer, add_affine_kernel, add_from_tflite
from core.ir.ops.add.emit import add_fields
from core.ir.integer_kernel import integer_model_kernel
from core.ir.ops.add.kernel import add_model
from core.ir.ops.add.pattern import PATTERN
from core.ir.ops.add.record import AddLayer


ADD = register_op(IrOp("add", AddLayer,
                       AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION, integer_model=add_model),
                       (PATTERN,), add_fields, integer_model_kernel(add_model), input_kinds=("pl", "add")))
ADD_AFFINE = register_affine_op(AffineOp("add", AddAffineLayer, add_affine_kernel, {"ADD": add_from_tflite}, input_kinds=("pl", "add")))
