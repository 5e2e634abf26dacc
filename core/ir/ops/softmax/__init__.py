"""softmax (a TF2IR extension): the classifier's Softmax kept as an int8 -> int8 layer at the
end of the network, in integer arithmetic (record.py, kernel.py): top-1 reads its output as it
would the logits. Host-only on the accelerator targets. Its arithmetic is defined once, as its integer model, which
the annotated graph computes as graph ops and the simulator as its kernel, so the two agree bit for bit. One record of
both dialects: the tflite_int8 dialect's (a .tflite's SOFTMAX, tflite.py) computes TFLite's fixed point (affine.py)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.softmax.emit import softmax_fields
from core.ir.ops.softmax.kernel import softmax_kernel, softmax_model
from core.ir.ops.softmax.pattern import PATTERN, SCALED
from core.ir.ops.softmax.record import SoftmaxLayer
from core.ir.ops.softmax.tflite import softmax_from_tflite


SOFTMAX = register_op(IrOp("softmax", SoftmaxLayer,
                           AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION, integer_model=softmax_model),
                           (PATTERN, SCALED), softmax_fields, softmax_kernel, builders={"SOFTMAX": softmax_from_tflite}, activation_widths=(8, 16)))
