"""The IR operations that never run on the accelerator, and why (partition keeps them on the host): one reason per
operation, for every dialect its record is of."""

from core.backends.accel.lowering import host_only

HOST_ONLY_REASONS = {
    "concat2": "the accelerator has no concatenation",
    "concat": "the accelerator has no concatenation",
    "resize_bilinear": "the accelerator has no interpolation",
    "mul": "the accelerator multiplies only by constant weights",
    "batch_matmul": "the accelerator's GEMM reads its weights from the constant area: a product of two activations is the host's",
    "constant": "a copy of constant values the host's own reader takes directly (the accelerator would load them from flash to "
                "store them back)",
    "gather": "a lookup of table rows by ids known at run time: the accelerator's DMA loads addresses fixed when it is compiled",
    "transpose": "a permutation of axes across the blocked layout is a host copy",
    "resize_nearest": "the accelerator has no gather; a host copy",
    "deconv": "the DMA cannot stuff zeros between pixels (a transposed conv is a conv of the stuffed image): the host's",
    "float_conv": "kept in float (calib.keep_float): the accelerator computes in integers",
    "float_dwconv": "kept in float (calib.keep_float): the accelerator computes in integers",
}

for _operation, _reason in HOST_ONLY_REASONS.items():
    host_only(_operation, _reason)
