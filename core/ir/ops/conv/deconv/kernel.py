"""The deconv layer's kernels: its equivalent stride-1 conv (record.py) over the stuffed input, by conv's
reference and fast kernels."""

from __future__ import annotations

import numpy as np

from core.ir.ops.conv.fast import conv_fast_kernel
from core.ir.ops.conv.kernel import conv_kernel
from core.ir.ops.conv.deconv.record import DeconvLayer


def stuffed(record: DeconvLayer, values: np.ndarray) -> np.ndarray:
    """[N, H, W, C] -> [N, (H - 1) * sh + 1, (W - 1) * sw + 1, C]: stride - 1 zeros between neighbouring pixels."""
    height, width = record.stuffed_size().pair()
    out = np.zeros((len(values), height, width, values.shape[3]), values.dtype)
    out[:, :: record.stride.height, :: record.stride.width] = values
    return out


def deconv_kernel(record: DeconvLayer, params: dict, inputs: list) -> np.ndarray:
    return conv_kernel(record.equivalent_conv(), params, [stuffed(record, np.asarray(inputs[0]))])


def deconv_fast_kernel(record: DeconvLayer, params: dict, inputs: list) -> np.ndarray:
    return conv_fast_kernel(record.equivalent_conv(), params, [stuffed(record, np.asarray(inputs[0]))])
