"""conv and dwconv (seed 000, 4.2 CONV/DWCONV): Conv2D / DepthwiseConv2dNative with their
bias, activation, a folded Pad or atrous block, and MatMul as the 1x1 conv (pattern.py); the typed record with its shapes,
MACs, shifts and accumulator bound (record.py); fields and int8 constants from the graph and
the calibration table (emit.py); the integer kernels (kernel.py, requantize.py; fast.py compiled)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.conv.affine_record import PARAM_KINDS as AFFINE_PARAM_KINDS, ConvAffineLayer, DwconvAffineLayer, conv_affine_kernel, conv_from_tflite
from core.ir.ops.conv.emit import conv_fields, conv_params
from core.ir.ops.conv.fast import conv_fast_kernel, dwconv_fast_kernel
from core.ir.ops.conv.kernel import conv_kernel, dwconv_kernel
from core.ir.ops.conv.pattern import DENSE, PATTERNS
from core.ir.ops.conv.record import ConvLayer, DwconvLayer


PARAM_KINDS = ("weight", "bias")


def _rule(weight_channel_axes: tuple[int, ...]) -> AnnotateRule:
    return AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION, weight=True, bias=True,
                        weight_channel_axes=weight_channel_axes)


# the weight's output channels, from the last axis: conv HWIO's (or a Dense [K, N]'s) last axis;
# depthwise HWCM's C * M (c * M + m)
CONV = register_op(IrOp("conv", ConvLayer, _rule((-1,)), (PATTERNS["conv"], DENSE), conv_fields, conv_kernel, conv_params,
                        param_kinds=PARAM_KINDS, float_variant="float_conv", fast_kernel=conv_fast_kernel))
DWCONV = register_op(IrOp("dwconv", DwconvLayer, _rule((-2, -1)), (PATTERNS["dwconv"],), conv_fields, dwconv_kernel,
                          conv_params, param_kinds=PARAM_KINDS, float_variant="float_dwconv", fast_kernel=dwconv_fast_kernel))

CONV_AFFINE = register_affine_op(AffineOp("conv", ConvAffineLayer, conv_affine_kernel,
                                          {"CONV_2D": conv_from_tflite, "FULLY_CONNECTED": conv_from_tflite}, AFFINE_PARAM_KINDS))
DWCONV_AFFINE = register_affine_op(AffineOp("dwconv", DwconvAffineLayer, conv_affine_kernel, {"DEPTHWISE_CONV_2D": conv_from_tflite},
                                            AFFINE_PARAM_KINDS))
