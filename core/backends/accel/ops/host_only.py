"""The IR operations that never run on the accelerator, and why (partition keeps them on the host): one reason per
operation, declared for each dialect that has it."""

from core.backends.accel.lowering import host_only
from core.ir.op import DIALECTS, dialect_key
from core.ir.ops import OPS  # every operation registered, in each dialect, before the loop below reads DIALECTS

HOST_ONLY_REASONS = {
    "reshape": "a change of shape across the blocked layout is a host copy (seed 004 [0055])",
    "concat2": "the accelerator has no concatenation",
    "concat": "the accelerator has no concatenation",
    "resize_bilinear": "the accelerator has no interpolation",
    "lut": "the accelerator has no table lookup",
    "softmax": "the accelerator has no exponent or division",
    "mul": "the accelerator multiplies only by constant weights",
    "resize_nearest": "the accelerator has no gather; a host copy",
    "deconv": "the DMA cannot stuff zeros between pixels (a transposed conv is a conv of the stuffed image): the host's",
    "float_conv": "kept in float (calib.keep_float): the accelerator computes in integers",
    "float_dwconv": "kept in float (calib.keep_float): the accelerator computes in integers",
}

for _operation, _reason in HOST_ONLY_REASONS.items():
    for _key in dict.fromkeys(dialect_key(_operation, _dialect) for _dialect, _operations in DIALECTS.items() if _operation in _operations):
        host_only(_key, _reason)
