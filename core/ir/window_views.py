"""The windows a windowed operation (a convolution, a pooling) computes over, as NumPy views of its padded input."""

from __future__ import annotations

import numpy as np


def windows(values: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
            pads: tuple[int, int, int, int], fill: float) -> np.ndarray:
    """[N, OH, OW, C, KH, KW] views of `values` [N, H, W, C] padded with `fill` (top, bottom, left, right)."""
    top, bottom, left, right = pads
    padded = np.pad(values, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    spans = np.lib.stride_tricks.sliding_window_view(padded, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(1, 2))
    return spans[:, ::sh, ::sw, :, ::dh, ::dw]
