"""add (seed 000, 4.2 ADD): the element-wise sum of two activations, with its activation
(pattern.py), its typed record (record.py), its fields (emit.py) and kernel (kernel.py)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.add.emit import add_fields
from core.ir.ops.add.kernel import add_kernel
from core.ir.ops.add.pattern import PATTERN
from core.ir.ops.add.record import AddLayer

ADD = register_op(IrOp("add", AddLayer, AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION), (PATTERN,),
                       add_fields, add_kernel, input_kinds=("pl", "add")))
