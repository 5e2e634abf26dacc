"""resize_bilinear (seed 000 ResizeBilinear) in fixed point, F = RESIZE_FRAC_BITS fractional bits."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.resize.emit import resize_fields
from core.ir.ops.resize.kernel import resize_bilinear_kernel
from core.ir.ops.resize.pattern import PATTERN
from core.ir.ops.resize.record import ResizeBilinearLayer

RESIZE_BILINEAR = register_op(IrOp("resize_bilinear", ResizeBilinearLayer,
                                   AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION), (PATTERN,), resize_fields,
                                   resize_bilinear_kernel))
