"""TensorFlow Lite's 16x8 mode, `tflite_int16x8` (the converter's EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8):
activations int16 symmetric (zero point 0, scale = the range's larger magnitude / 32767), weights int8 symmetric per
output channel in [-127, 127], biases int64 at input scale x weight scale. SOFTMAX, LOGISTIC and TANH output 1/32768
with zero point 0, as TFLite's int16 kernels require.

Calibration and annotation run on it: the table, and the fake-quantized graph's SQNR and top-1 against float, say what
16-bit activations buy against int8 before any integer is computed. Its IR (the tflite_int8 dialect at int16 with int64
biases), simulator and C are not built yet: `ir_dialect` is None, and a run is refused past annotate, before any stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from core.quantize.schemes.base import register_scheme
from core.quantize.schemes.tflite_int8 import TfliteInt8


@dataclass
class TfliteInt16x8Settings:
    """target.scheme of tflite_int16x8 (`target/scheme=tflite_int16x8`): TFLite's 16x8 mode."""

    name: str = "tflite_int16x8"
    bits: int = field(default=16, metadata={"check": "positive"})  # the activations'; weights are int8

    def errors(self) -> list[str]:
        return [] if self.bits == 16 else [f"target.scheme.bits={self.bits}: the 16x8 scheme's activations are int16; set "
                                           "target.scheme.bits=16"]


@register_scheme
@dataclass(frozen=True)
class TfliteInt16x8(TfliteInt8):
    """TFLite's 16x8 mode: TfliteInt8's per-channel int8 weights, with int16 symmetric activations and int64 biases."""

    bits: int = 16
    name: ClassVar[str] = "tflite_int16x8"
    ir_dialect: ClassVar[str | None] = None  # not built yet: calibrate and annotate only
    accelerated: ClassVar[bool] = False
    settings: ClassVar[type] = TfliteInt16x8Settings
    bias_bits: ClassVar[int] = 64
    # TFLite's int16 kernels: SOFTMAX (reference_ops::SoftmaxInt16), LOGISTIC and TANH output 1/32768, zero point 0
    fixed_outputs = {"Softmax": (1.0 / 32768, 0), "Sigmoid": (1.0 / 32768, 0), "Tanh": (1.0 / 32768, 0)}

    @property
    def weight_bits(self) -> int:
        return 8

    def affine(self, low, high):
        """Symmetric, as the converter quantizes int16 activations (GetSymmetricScalesFromMaxMin): scale = the larger
        magnitude / 32767, zero point 0; an all-zero tensor: any scale."""
        magnitude = max(-float(low), float(high), 0.0)
        scale = magnitude / self.qmax if magnitude > 0 else 1.0
        return scale, 0, [self.qmin * scale, self.qmax * scale]
