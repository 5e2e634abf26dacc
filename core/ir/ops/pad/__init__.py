"""pad: spatial padding, one record of both dialects (record.py, TF2IR 1.2). TF2IR's: a Pad by zeros no conv absorbs
as its own padding (Keras' ZeroPadding2D before a pooling layer), sharing its input's scale (an IDENTITY annotate
rule, like reshape: zero is 0 at any scale). The tflite_int8 dialect's (tflite.py): a .tflite's PAD by the zero
point, which the .tflite writer also emits for a window's explicit padding that SAME and VALID cannot express."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.pad.emit import pad_fields
from core.ir.ops.pad.kernel import pad_kernel
from core.ir.ops.pad.pattern import PATTERN
from core.ir.ops.pad.record import PadLayer
from core.ir.ops.pad.tflite import pad_from_tflite

PAD = register_op(IrOp("pad", PadLayer, AnnotateRule(inputs=(QKind.IDENTITY,), output=QKind.IDENTITY), (PATTERN,), pad_fields, pad_kernel,
                       builders={"PAD": pad_from_tflite}, activation_widths=(8, 16)))
