"""softmax (a TF2IR extension): the classifier's Softmax kept as an int8 -> int8 layer at the
end of the network, in integer arithmetic (record.py, kernel.py): top-1 reads its output as it
would the logits. Host-only on the accelerator targets. The annotated graph computes the same
integers (its integer model), so it agrees with the IR bit for bit."""

from core.frontend.layers import AnnotateRule, IntegerModelBuilder, QKind
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.softmax.affine_record import SoftmaxAffineLayer, softmax_affine_kernel, softmax_from_tflite
from core.ir.ops.softmax.emit import softmax_fields
from core.ir.ops.softmax.kernel import softmax_kernel
from core.ir.ops.softmax.pattern import PATTERN
from core.ir.ops.softmax.record import SoftmaxLayer, exp_table


def softmax_model(model: IntegerModelBuilder) -> str:
    """The kernel's steps as int64 graph ops (TensorFlow's integer ops are exact)."""
    x = model.op("Cast", [model.to_ints(model.inputs[0], model.input_log2scales[0])], cast_to="int64")
    last = model.const("last_axis", -1, "int32")
    d = model.op("Sub", [model.op("Max", [x, last], keep_dims=True), x])
    e = model.op("GatherV2", [model.const("exp_table", exp_table(model.input_log2scales[0]).astype("int64"), "int64"), d,
                              model.const("axis", 0, "int32")])
    total = model.op("Sum", [e, last], keep_dims=True)
    numerator = model.op("AddV2", [model.op("Mul", [e, model.const("scale", 2 ** (model.output_log2scale + 1), "int64")]), total])
    quotient = model.op("FloorDiv", [numerator, model.op("Mul", [total, model.const("two", 2, "int64")])])
    saturated = model.op("Minimum", [quotient, model.const("int8_max", 127, "int64")])
    return model.from_ints(model.op("Cast", [saturated], cast_to="float32"), model.output_log2scale)


SOFTMAX = register_op(IrOp("softmax", SoftmaxLayer,
                           AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION, integer_model=softmax_model),
                           (PATTERN,), softmax_fields, softmax_kernel))
SOFTMAX_AFFINE = register_affine_op(AffineOp("softmax", SoftmaxAffineLayer, softmax_affine_kernel, {"SOFTMAX": softmax_from_tflite}))
