"""add (seed 000, 4.2 ADD): the element-wise sum of two activations, with its activation
(pattern.py), its typed record (record.py), its fields (emit.py) and its integer arithmetic (kernel.py), defined
once as its integer model: the annotated graph computes its two roundings (the finer operand aligned, then the sum
moved to the output scale) as graph ops, the simulator as its kernel, so the two agree bit for bit whatever the scales.
One record of both dialects: the tflite_int8 dialect's (a .tflite's ADD, tflite.py, its requantization core/ir/common_scale.py's)
computes TFLite's arithmetic: one definition of both, kernel.py's add_arithmetic, with each record's requantization."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.add.emit import add_fields
from core.ir.ops.add.kernel import add_kernel, add_model, record_add
from core.ir.ops.add.pattern import PATTERN
from core.ir.ops.add.record import AddLayer
from core.ir.ops.add.tflite import add_from_tflite


ADD = register_op(IrOp("add", AddLayer,
                       AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION, integer_model=add_model, carries_tails=True),
                       (PATTERN,), add_fields, add_kernel, input_kinds=("pl", "add"), builders={"ADD": add_from_tflite}, activation_widths=(8, 16),
                       constant_operands=True, elementwise=record_add))
