"""The IR operations that never run on the accelerator, and why (partition keeps them on the host)."""

from core.backends.accel.lowering import host_only
from core.ir.op import dialect_key
from core.ir.tflite_dialect import SCHEME

host_only("reshape", "a change of shape across the blocked layout is a host copy (seed 004 [0055])")
host_only("concat2", "the accelerator has no concatenation")
host_only("concat", "the accelerator has no concatenation")
host_only("resize_bilinear", "the accelerator has no interpolation")
host_only("lut", "the accelerator has no table lookup")
host_only("softmax", "the accelerator has no exponent or division")
host_only("mul", "the accelerator multiplies only by constant weights")
host_only("resize_nearest", "the accelerator has no gather; a host copy")
host_only("deconv", "the DMA cannot stuff zeros between pixels (a transposed conv is a conv of the stuffed image): the host's")
host_only("float_conv", "kept in float (calib.keep_float): the accelerator computes in integers")
host_only("float_dwconv", "kept in float (calib.keep_float): the accelerator computes in integers")

# the tflite_int8 dialect's (core/ir/op.py dialect_key)
host_only(dialect_key("reshape", SCHEME), "a change of shape across the blocked layout is a host copy (seed 004 [0055])")
host_only(dialect_key("concat", SCHEME), "the accelerator has no concatenation (nor TFLite's rescaling of each input)")
host_only(dialect_key("resize_bilinear", SCHEME), "the accelerator has no interpolation")
host_only(dialect_key("resize_nearest", SCHEME), "the accelerator has no gather; a host copy")
host_only(dialect_key("lut", SCHEME), "the accelerator has no table lookup")
host_only(dialect_key("softmax", SCHEME), "the accelerator has no exponent or division")
host_only(dialect_key("mul", SCHEME), "the accelerator multiplies only by constant weights")
