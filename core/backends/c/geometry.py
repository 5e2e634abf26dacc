"""A windowed layer's geometry as the C emitters write it into loops and sizes: the input, output and kernel
extents, strides, dilations and padding of a conv, depthwise conv or pool (its IR record's window), typed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WindowGeometry:
    height: int
    width: int
    in_channels: int
    out_height: int
    out_width: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride_h: int
    stride_w: int
    dilation_h: int
    dilation_w: int
    pad_top: int
    pad_left: int

    @classmethod
    def of(cls, record) -> "WindowGeometry":
        """A conv, dwconv or pool record's window (a pool's output channels are its input's)."""
        window = record.window
        return cls(window.height, window.width, record.input_channel_num, window.out_height, window.out_width,
                   getattr(record, "output_channel_num", record.input_channel_num), window.kernel[0], window.kernel[1],
                   window.stride[0], window.stride[1], window.dilation[0], window.dilation[1], window.pad_top, window.pad_left)

    @property
    def taps(self) -> int:
        """Products per output value: kernel_h x kernel_w x in_channels."""
        return self.kernel_h * self.kernel_w * self.in_channels

    @property
    def padded_height(self) -> int:
        """Rows of the padded input: every row a window reads."""
        return max(self.height + self.pad_top, (self.out_height - 1) * self.stride_h + (self.kernel_h - 1) * self.dilation_h + 1)

    @property
    def padded_width(self) -> int:
        return max(self.width + self.pad_left, (self.out_width - 1) * self.stride_w + (self.kernel_w - 1) * self.dilation_w + 1)

    @property
    def needs_padding(self) -> bool:
        """Whether some window reads outside the input (the input is then copied into a padded buffer)."""
        return (self.padded_height, self.padded_width) != (self.height, self.width) or bool(self.pad_top or self.pad_left)


@dataclass(frozen=True)
class Clamp:
    """TF2IR's requantization of an int32 sum: a floor shift right, then the clamp to [low, high]."""

    shift: int
    low: int
    high: int
