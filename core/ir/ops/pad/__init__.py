"""pad: spatial padding by a value, so far only in the tflite_int8 dialect (a .tflite's PAD, which the .tflite
writer emits for a window's explicit padding that SAME and VALID cannot express): the record, its builder and
kernel (affine_record.py). TF2IR folds a Pad into the window that reads it instead."""

from core.ir.op import AffineOp, register_affine_op
from core.ir.ops.pad.affine_record import PadAffineLayer, pad_affine_kernel, pad_from_tflite

PAD_AFFINE = register_affine_op(AffineOp("pad", PadAffineLayer, pad_affine_kernel, {"PAD": pad_from_tflite}))
