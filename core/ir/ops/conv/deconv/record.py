"""The deconv IR record (TF2IR 1.2): a transposed convolution (Keras' Conv2DTranspose) as the convolution it
equals: its input with stride - 1 zeros between neighbouring pixels (`stuffed`), padded by `equivalent_padding`,
convolved at stride 1 with the filter flipped in height and width and its channels swapped, which the IR's weight
holds (HWCiCo, as conv's). Fields and arithmetic as conv's; `padding` is TensorFlow's of the transposed
convolution (the forward convolution's that would map the output back onto the input)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.ops.conv.record import ConvLayer
from core.ir.records import IrError, OpSchema, Size


def equivalent_padding(size: int, out: int, kernel: int, stride: int, before: int) -> tuple[int, int]:
    """(before, after) padding of the stuffed input ((size - 1) * stride + 1 values) that a stride-1 convolution of
    `kernel` maps onto `out` values, given the transposed convolution's padding `before`."""
    return kernel - 1 - before, out + before - (size - 1) * stride - 1


@dataclass(frozen=True, kw_only=True)
class DeconvLayer(ConvLayer):
    operation: ClassVar[str] = "deconv"
    label_prefix: ClassVar[str] = "deconv"
    dialects: ClassVar[tuple[str, ...]] = ("tf2ir",)  # TF2IR's alone: TRANSPOSE_CONV is not read or written yet
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Transposed convolution (Conv2DTranspose): the input with stride - 1 zeros between neighbouring pixels, '
             'padded by kernel - 1 - padding before and the rest after, convolved at stride 1 with `weight` (the '
             'TensorFlow filter flipped in height and width, channels swapped: HWCiCo) as conv, with its bias, shifts, '
             'activation and saturation. padding: TensorFlow\'s of the transposed convolution.'),
        since="1.2",
    )

    def __post_init__(self):
        for axis in ("height", "width"):
            before, after = self.stuffed_padding(axis)
            if min(before, after) < 0 or getattr(self.dilations, axis) != 1:
                raise IrError(f"layer {self.name}: deconv output_size {list(self.output_size.pair())} and padding "
                              f"{self.padding.as_list()} do not fit input_size {list(self.input_size.pair())}, kernel_size "
                              f"{list(self.kernel_size.pair())} and stride {list(self.stride.pair())} along {axis} (dilations must be 1)")

    def stuffed_padding(self, axis: str) -> tuple[int, int]:
        before = self.padding.top if axis == "height" else self.padding.left
        return equivalent_padding(getattr(self.input_size, axis), getattr(self.output_size, axis), getattr(self.kernel_size, axis),
                                  getattr(self.stride, axis), before)

    def stuffed_size(self) -> Size:
        return Size((self.input_size.height - 1) * self.stride.height + 1, (self.input_size.width - 1) * self.stride.width + 1)

    def equivalent_conv(self) -> ConvLayer:
        """The stride-1 conv over the stuffed input that computes this layer's integers."""
        (top, bottom), (left, right) = self.stuffed_padding("height"), self.stuffed_padding("width")
        height, width = self.stuffed_size().pair()
        data = {**self.to_json(), "operation": "conv", "input_size": {"height": height, "width": width},
                "stride": {"height": 1, "width": 1}, "padding": {"top": top, "bottom": bottom, "left": left, "right": right}}
        return ConvLayer.from_json(data)

    def macs(self) -> int:
        return self.input_size.height * self.input_size.width * self.kernel_size.height * self.kernel_size.width * \
            self.input_channel_num * self.output_channel_num

    def fused_operators(self) -> list[str]:
        return ["conv2d_transpose", *(["bias_add"] if self.load_bias else []), "requantize", *self.activation_operators()]
