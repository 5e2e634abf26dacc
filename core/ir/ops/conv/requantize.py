"""How conv and dwconv turn int32 sums into int8, as the hardware does it (seed 000):

1. + bias << bias_shift per output channel (when load_bias): the bias at the accumulator's
   scale 2^-(input_log2scale + weight_log2scale), exact.
2. >> output_shift with round half up: (acc + 2^(output_shift - 1)) >> output_shift, an
   arithmetic shift (floor for negatives), i.e. floor(acc * 2^-output_shift + 1/2): ties go
   towards +inf (2.5 -> 3, -2.5 -> -2), as TF's FakeQuant rounds. output_shift = 0: no rounding.
   The sum of step 1 and the rounding constant must fit the int32 accumulator (else OverflowError).
3. The activation's clamp at the output scale (Relu6: [0, 6 * 2^output_log2scale]), which after
   rounding equals TF's activation before its FakeQuant, as rounding is monotone.
4. Saturate to [-128, 127] (TF's FakeQuant clamp); stored as int8.

The kernels compute exactly this, in int32/int64 or, where exact, float32 (`Requantize`)."""

from __future__ import annotations

import numpy as np

from core.ir.fixedpoint import FLOAT32_EXACT_INT, INT32_MAX, INT32_MIN, rounding_constant

# Where it is exact, the kernels accumulate and requantize in float32 (a GEMM with the
# weights pre-scaled by 2^-output_shift and the per-channel offset folded in, then clip and
# floor): the same integers as the int path, with fewer passes. False forces the int path.
FLOAT32_ACCUMULATION = True


class Requantize:
    """How one call turns accumulators into int8, planned once.

    offset = (bias << bias_shift) + 2^(output_shift - 1) per output channel (the bias and the
    rounding constant, both added before the shift); [low, high] the activation's clamp.
    `bound` >= |sum of products| + |offset| for every output (the record's accumulator_bound),
    so: int32 accumulators when bound <= 2^31 - 1 (else int64, checked against int32: the
    hardware's accumulator), and the float32 path when bound <= 2^24 (every partial sum,
    scaled by a power of two, is exact)."""

    def __init__(self, shift: int, bias, bias_shift: int, channels: int, clamp: tuple[int, int], bound: int):
        self.shift = int(shift)
        if self.shift < 0:
            raise ValueError(f"output_shift {self.shift} < 0: the hardware only shifts the accumulator right")
        offset = np.zeros(channels, np.int64)
        if bias is not None:
            if bias_shift < 0:
                raise ValueError(f"bias_shift {bias_shift} < 0: the hardware only shifts the bias left")
            bias = np.asarray(bias)
            if bias.shape != (channels,) or not np.issubdtype(bias.dtype, np.integer):
                raise ValueError(f"bias of shape {list(bias.shape)} ({bias.dtype}) for {channels} output channels; "
                                 f"int8 C expected")
            if bias_shift > 40:
                raise ValueError(f"bias_shift {bias_shift}: beyond any int32 accumulator")
            offset += bias.astype(np.int64) << bias_shift
        self.offset = offset + rounding_constant(self.shift)
        self.int_dtype = np.int32 if bound <= INT32_MAX else np.int64
        # (a shift beyond 100 would underflow 2^-shift in float32; the IR's shifts are <= 31)
        self.float32 = FLOAT32_ACCUMULATION and bound <= FLOAT32_EXACT_INT and self.shift <= 100
        self.scale = np.float32(2.0**-self.shift)
        self.low, self.high = clamp

    @classmethod
    def of(cls, record, params: dict) -> "Requantize":
        """The plan of a conv/dwconv record with its params."""
        bias = params.get("bias") if record.load_bias else None
        return cls(record.output_shift, bias, int(record.bias_shift), record.output_channel_num, record.clamp(),
                   record.accumulator_bound(params))

    def scaled_offset(self) -> np.ndarray:
        """offset * 2^-output_shift as float32: exact, |offset| <= 2^24 on the float32 path."""
        return (self.offset.astype(np.float64) * 2.0**-self.shift).astype(np.float32)

    def finish_int(self, acc: np.ndarray, out: np.ndarray, offset: np.ndarray) -> None:
        """Integer accumulators (modified in place; last axis matching `offset`) -> out (int8)."""
        np.add(acc, offset.astype(acc.dtype), out=acc)
        if acc.dtype != np.int32 and acc.size and (acc.min() < INT32_MIN or acc.max() > INT32_MAX):
            raise OverflowError("the conv's accumulator (sum + bias << bias_shift + rounding) exceeds int32")
        if self.shift > 0:
            np.right_shift(acc, self.shift, out=acc)  # arithmetic: floor
        np.clip(acc, self.low, self.high, out=acc)
        np.copyto(out, acc, casting="unsafe")

    def finish_float(self, scaled: np.ndarray, out: np.ndarray) -> None:
        """(sum + offset) * 2^-output_shift, exact in float32 (modified in place) -> out (int8):
        floor is the arithmetic shift; clamping to the integers [low, high] before or after the
        floor is the same."""
        np.clip(scaled, self.low, self.high, out=scaled)
        np.floor(scaled, out=out, casting="unsafe")


def requantize(acc: np.ndarray, bias, *, output_shift: int, bias_shift: int = 0, clamp: tuple[int, int] = (-128, 127)) -> np.ndarray:
    """The accumulator (int8 x int8 sums, [..., C]) -> int8 output, steps 1-4 above, in int64."""
    channels = acc.shape[-1]
    plan = Requantize(output_shift, bias, bias_shift, channels, clamp, bound=INT32_MAX + 1)
    work = np.array(acc, dtype=np.int64)
    out = np.empty(work.shape, np.int8)
    plan.finish_int(work, out, plan.offset)
    return out
