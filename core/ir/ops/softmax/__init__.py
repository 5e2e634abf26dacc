"""softmax (a TF2IR extension): the classifier's Softmax kept as an int8 -> int8 layer at the
end of the network, in integer arithmetic (record.py, kernel.py): top-1 reads its output as it
would the logits. Host-only on the accelerator targets. Its arithmetic is defined once, as its integer model, which
the annotated graph computes as graph ops and the simulator as its kernel, so the two agree bit for bit."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.softmax.affine_record import SoftmaxAffineLayer, softmax_affine_kernel, softmax_from_tflite
from core.ir.ops.softmax.emit import softmax_fields
from core.ir.integer_kernel import integer_model_kernel
from core.ir.ops.softmax.kernel import softmax_model
from core.ir.ops.softmax.pattern import PATTERN
from core.ir.ops.softmax.record import SoftmaxLayer


SOFTMAX = register_op(IrOp("softmax", SoftmaxLayer,
                           AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION, integer_model=softmax_model),
                           (PATTERN,), softmax_fields, integer_model_kernel(softmax_model)))
SOFTMAX_AFFINE = register_affine_op(AffineOp("softmax", SoftmaxAffineLayer, softmax_affine_kernel, {"SOFTMAX": softmax_from_tflite}))
