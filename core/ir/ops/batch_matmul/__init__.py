"""batch_matmul (a TF2IR extension; the tflite_int8 dialect's BATCH_MATMUL): the product of two activations over their
last two axes, batches broadcast (a multi-head attention's q k^T and p v per head), defined once in kernel.py: TF2IR's
sums shifted once (the annotated graph computes them as the float product and one FakeQuant, exact below 2^24), TFLite's
requantized by a multiplier."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.batch_matmul.emit import batch_matmul_fields
from core.ir.ops.batch_matmul.kernel import batch_matmul_kernel
from core.ir.ops.batch_matmul.pattern import PATTERN
from core.ir.ops.batch_matmul.record import BatchMatMulLayer
from core.ir.ops.batch_matmul.tflite import batch_matmul_from_tflite

BATCH_MATMUL = register_op(IrOp("batch_matmul", BatchMatMulLayer, AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION),
                                (PATTERN,), batch_matmul_fields, batch_matmul_kernel, input_kinds=("input0", "input1"),
                                builders={"BATCH_MATMUL": batch_matmul_from_tflite}))
