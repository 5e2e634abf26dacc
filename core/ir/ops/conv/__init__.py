"""conv and dwconv (seed 000, 4.2 CONV/DWCONV; the tflite_int8 dialect's since 1.2): Conv2D / DepthwiseConv2dNative with
their bias, activation, a folded Pad or atrous block, and MatMul as the 1x1 conv (pattern.py); one typed record of both
dialects with its shapes, MACs, shifts, accumulator bound and typed requantization (record.py); fields and int8
constants from the graph and the calibration table (emit.py); a .tflite's CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED as the record (tflite.py); the integer kernels by the record's requantization: TF2IR's shifts
(kernel.py, requantize.py; fast.py compiled), TFLite's per-channel multipliers (affine.py, affine_fast.py).

Its variants, operations of their own built on its geometry and kernels, in folders here: deconv (deconv/, the stride-1
conv over the zero-stuffed input) and the convolutions kept in float (float_conv/, conv's and dwconv's float_variant)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.conv.emit import conv_fields, conv_params, depthwise_as_conv
from core.ir.ops.conv.fast import conv_fast_kernel, dwconv_fast_kernel
from core.ir.ops.conv.kernel import conv_affine_kernel, conv_kernel, dwconv_kernel
from core.ir.ops.conv.pattern import DENSE, PATTERNS
from core.ir.ops.conv.record import ChannelRequantization, ConvLayer, DwconvLayer, ShiftRequantization, by_requantization
from core.ir.ops.conv.tflite import conv_from_tflite
from core.ir.ops.conv.deconv import DECONV  # its variants register with it
from core.ir.ops.conv.float_conv import FLOAT_CONV, FLOAT_DWCONV

# TFLite's requantization reads a multiplier and a shift per output channel besides the weight and the bias
PARAM_KINDS = {"tf2ir": ("weight", "bias"), "tflite_int8": ("weight", "bias", "multiplier", "shift")}


def _rule(weight_channel_axes: tuple[int, ...]) -> AnnotateRule:
    return AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION, weight=True, bias=True,
                        weight_channel_axes=weight_channel_axes)


def _kernels(shift_kernel, shift_fast_kernel) -> dict:
    return {"kernel": by_requantization({ShiftRequantization: shift_kernel, ChannelRequantization: conv_affine_kernel}),
            "fast_kernel": by_requantization({ShiftRequantization: shift_fast_kernel, ChannelRequantization: conv_affine_kernel})}


# the weight's output channels, from the last axis: conv HWIO's (or a Dense [K, N]'s) last axis;
# depthwise HWCM's C * M (c * M + m)
CONV = register_op(IrOp("conv", ConvLayer, _rule((-1,)), (PATTERNS["conv"], DENSE), conv_fields, params=conv_params,
                        param_kinds=PARAM_KINDS, float_variant="float_conv", **_kernels(conv_kernel, conv_fast_kernel),
                        builders={"CONV_2D": conv_from_tflite, "FULLY_CONNECTED": conv_from_tflite}, activation_widths=(8, 16)))
DWCONV = register_op(IrOp("dwconv", DwconvLayer, _rule((-2, -1)), (PATTERNS["dwconv"],), conv_fields, params=conv_params,
                          param_kinds=PARAM_KINDS, float_variant="float_dwconv", **_kernels(dwconv_kernel, dwconv_fast_kernel),
                          builders={"DEPTHWISE_CONV_2D": conv_from_tflite}, activation_widths=(8, 16),
                          tf2ir_form=depthwise_as_conv))

__all__ = ["CONV", "DECONV", "DWCONV", "FLOAT_CONV", "FLOAT_DWCONV"]
