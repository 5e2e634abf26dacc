"""constant (a TF2IR 1.5 extension; in the tflite_int8 dialect, a constant operand of ADD or CONCATENATION): a fixed
tensor read as an activation, a ViT's class token and position embedding. Its values are quantized on its own output grid
(ranged by them: output_of_weight) and copied to every image of the batch of its one input, which it reads for nothing
else (core/frontend/batched_constant.py: the graph's form of it)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.constant.emit import constant_fields, constant_params
from core.ir.ops.constant.kernel import constant_kernel
from core.ir.ops.constant.pattern import PATTERN
from core.ir.ops.constant.record import ConstantLayer

CONSTANT = register_op(IrOp("constant", ConstantLayer, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION, output_of_weight=True),
                            (PATTERN,), constant_fields, constant_kernel, constant_params, input_kinds=("like",), param_kinds=("values",),
                            activation_widths=(8, 16)))
