"""resize_bilinear (seed 000 ResizeBilinear) in fixed point, F = RESIZE_FRAC_BITS fractional bits (the tflite_int8
dialect's: TFLite's integer interpolation, affine_record.py), and resize_nearest (a TF2IR extension of both dialects:
ResizeNearestNeighbor, a copy sharing its input's grid)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.resize.affine_record import ResizeBilinearAffineLayer, resize_bilinear_affine_kernel, resize_from_tflite
from core.ir.ops.resize.emit import resize_fields, resize_nearest_fields
from core.ir.ops.resize.kernel import resize_bilinear_kernel, resize_nearest_kernel
from core.ir.ops.resize.pattern import NEAREST, PATTERN
from core.ir.ops.resize.record import ResizeBilinearLayer, ResizeNearestLayer

RESIZE_BILINEAR = register_op(IrOp("resize_bilinear", ResizeBilinearLayer,
                                   AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION), (PATTERN,), resize_fields,
                                   resize_bilinear_kernel))
# every output value is an input value: like reshape, it keeps its input's int8 values and scale
RESIZE_NEAREST = register_op(IrOp("resize_nearest", ResizeNearestLayer,
                                  AnnotateRule(inputs=(QKind.IDENTITY,), output=QKind.IDENTITY), (NEAREST,),
                                  resize_nearest_fields, resize_nearest_kernel, builders={"RESIZE_NEAREST_NEIGHBOR": resize_from_tflite}))

RESIZE_BILINEAR_AFFINE = register_affine_op(AffineOp("resize_bilinear", ResizeBilinearAffineLayer, resize_bilinear_affine_kernel,
                                                     {"RESIZE_BILINEAR": resize_from_tflite}))
