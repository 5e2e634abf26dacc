"""resize_bilinear (seed 000 ResizeBilinear) in fixed point, F = RESIZE_FRAC_BITS fractional bits (the tflite_int8
dialect's: TFLite's integer interpolation, affine.py), and resize_nearest (a TF2IR extension: ResizeNearestNeighbor,
a copy sharing its input's grid), each one record of both dialects; tflite.py reads them from a .tflite."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.resize.emit import resize_fields, resize_nearest_fields
from core.ir.ops.resize.kernel import resize_bilinear_kernel, resize_nearest_kernel
from core.ir.ops.resize.pattern import NEAREST, PATTERN
from core.ir.ops.resize.record import ResizeBilinearLayer, ResizeNearestLayer
from core.ir.ops.resize.tflite import resize_from_tflite

RESIZE_BILINEAR = register_op(IrOp("resize_bilinear", ResizeBilinearLayer,
                                   AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION), (PATTERN,), resize_fields,
                                   resize_bilinear_kernel, builders={"RESIZE_BILINEAR": resize_from_tflite},
                                   activation_widths=(8, 16)))
# every output value is an input value: like reshape, it keeps its input's int8 values and scale
RESIZE_NEAREST = register_op(IrOp("resize_nearest", ResizeNearestLayer,
                                  AnnotateRule(inputs=(QKind.IDENTITY,), output=QKind.IDENTITY), (NEAREST,),
                                  resize_nearest_fields, resize_nearest_kernel, builders={"RESIZE_NEAREST_NEIGHBOR": resize_from_tflite},
                                  activation_widths=(8, 16)))
