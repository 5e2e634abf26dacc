"""TensorFlow Lite's 16x8 mode, `tflite_int16x8` (the converter's EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8):
activations int16 symmetric (zero point 0, scale = the range's larger magnitude / 32767), weights int8 symmetric per
output channel in [-127, 127], biases int64 at input scale x weight scale. SOFTMAX, LOGISTIC and TANH output 1/32768
with zero point 0, as TFLite's int16 kernels require.

Its IR is the tflite_int8 dialect's at int16 (`"activation_bits": 16` on every layer, int64 biases; the convolutions'
multiplier reduced to 16 bits), read from the 16x8 `.tflite` the table defines, as the int8 scheme's is: the simulator,
and simulate's check against the runtime's interpreter, compute TFLite's 16x8 kernels' integers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from core.quantize.schemes.base import register_scheme
from core.frontend.layers import OutputRule
from core.quantize.schemes.tflite_int8 import TfliteInt8, TfliteRuntime
from core.quantize.tflite_math import SIGNED_UNIT_RANGE_OUTPUT, UNIT_RANGE_OUTPUT


@dataclass
class TfliteInt16x8Settings:
    """target.scheme of tflite_int16x8 (`target/scheme=tflite_int16x8`): TFLite's 16x8 mode."""

    name: str = "tflite_int16x8"
    bits: int = field(default=16, metadata={"check": "positive"})  # the activations'; weights are int8
    # whose bytes the simulator computes and simulate checks every layer against (as tflite_int8's)
    runtime: TfliteRuntime = TfliteRuntime.litert_reference

    def errors(self) -> list[str]:
        return [] if self.bits == 16 else [f"target.scheme.bits={self.bits}: the 16x8 scheme's activations are int16; set "
                                           "target.scheme.bits=16"]


@register_scheme
@dataclass(frozen=True)
class TfliteInt16x8(TfliteInt8):
    """TFLite's 16x8 mode: TfliteInt8's per-channel int8 weights, with int16 symmetric activations and int64 biases."""

    bits: int = 16
    name: ClassVar[str] = "tflite_int16x8"
    ir_dialect: ClassVar[str] = "tflite_int8"  # its layers at "activation_bits": 16
    accelerated: ClassVar[bool] = True  # an accelerator target may choose it: its layers go to the host, with the reason
    settings: ClassVar[type] = TfliteInt16x8Settings
    bias_bits: ClassVar[int] = 64
    fixed_outputs = {OutputRule.UNIT_RANGE: UNIT_RANGE_OUTPUT[16], OutputRule.SIGNED_UNIT_RANGE: SIGNED_UNIT_RANGE_OUTPUT[16]}

    @property
    def weight_bits(self) -> int:
        return 8

    def affine(self, low, high):
        """Symmetric, as the converter quantizes int16 activations (GetSymmetricScalesFromMaxMin): scale = the larger
        magnitude / 32767, zero point 0; an all-zero tensor: any scale."""
        magnitude = max(-float(low), float(high), 0.0)
        scale = magnitude / self.qmax if magnitude > 0 else 1.0
        return scale, 0, [self.qmin * scale, self.qmax * scale]
