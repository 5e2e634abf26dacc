"""deconv (TF2IR 1.2): Keras' Conv2DTranspose (pattern.py: Conv2DBackpropInput and the ops computing its output
size, its bias and activation); the typed record, which is the stride-1 conv over the zero-stuffed input it equals
(record.py); fields and int8 constants (emit.py); the kernels, conv's on the stuffed input (kernel.py)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.conv.deconv.emit import deconv_fields, deconv_params
from core.ir.ops.conv.deconv.kernel import deconv_fast_kernel, deconv_kernel
from core.ir.ops.conv.deconv.pattern import PATTERN
from core.ir.ops.conv.deconv.record import DeconvLayer

# the filter's output channels: TensorFlow's [height, width, output, input] axis -2
DECONV = register_op(IrOp("deconv", DeconvLayer,
                          AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION, weight=True, bias=True, weight_channel_axes=(-2,)),
                          (PATTERN,), deconv_fields, deconv_kernel, deconv_params, param_kinds=("weight", "bias"),
                          fast_kernel=deconv_fast_kernel))
