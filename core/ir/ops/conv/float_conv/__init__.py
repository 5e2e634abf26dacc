"""float_conv and float_dwconv (a TF2IR extension): conv and dwconv layers that calibration keeps
in float (calib.keep_float), run on the host with the quantize/dequantize at their borders inside
the layer (record.py). No graph pattern builds them: emit-IR gives a conv or dwconv layer its
operation's `float_variant` when the table lists it in float_layers (core/ir/op.py: op_of). The
annotated graph runs such a layer as the float graph does, TensorFlow's float conv, whose order of
additions is not the IR's, so annotate and simulate may differ there by a rounding; simulate and
the generated C agree bit for bit."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.conv.float_conv.emit import float_conv_fields, float_conv_params
from core.ir.ops.conv.float_conv.kernel import float_conv_kernel
from core.ir.ops.conv.float_conv.record import FloatConvLayer, FloatDwconvLayer

PARAM_KINDS = ("weight", "bias")
# as the conv's rule, but its weight and bias stay float: the table has entries for neither
RULE = AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION)

FLOAT_CONV = register_op(IrOp("float_conv", FloatConvLayer, RULE, (), float_conv_fields, float_conv_kernel, float_conv_params,
                              param_kinds=PARAM_KINDS))
FLOAT_DWCONV = register_op(IrOp("float_dwconv", FloatDwconvLayer, RULE, (), float_conv_fields, float_conv_kernel,
                                float_conv_params, param_kinds=PARAM_KINDS))
