"""The deployment runtimes whose bytes a scheme's integers are made exact against (`target.scheme.runtime`).

The tflite_int8 scheme is one specification that the runtimes users deploy compute with slightly different
integer arithmetic: a user who deploys the same `.tflite` with TensorFlow Lite for Microcontrollers gets other
bytes than LiteRT's reference kernels give, 1 LSB apart where a rounding differs. A runtime is declared here
as data, by the arithmetic of each operator where the runtimes differ (read from their kernels' source:
tensorflow/lite/kernels/internal/reference/ in LiteRT and in tflite-micro); the IR reads a `.tflite` under
it (core/ir/tflite_ir.py), so the simulator, the host C and the accelerator compute its bytes, and simulate
checks every layer against that runtime's own interpreter (core/quantize/tflite_reference.py).

Where they agree (convolutions, add, mul, pools, mean, softmax, hard-swish, leaky ReLU, resizes, quantize),
both run TFLite's shared reference kernels; the property tests of tests/test_runtimes.py drive each operator
to its arithmetic's extremes against both interpreters."""

from __future__ import annotations

from dataclasses import dataclass

# FULLY_CONNECTED's requantization of its int32 sums (the convolutions' is "double" on every runtime)
SINGLE_ROUNDING = "single"  # one rounding of the 64-bit product x multiplier (TFLITE_SINGLE_ROUNDING's formula)
DOUBLE_ROUNDING = "double"  # gemmlowp's SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT
# every runtime's 16x8 convolutions (and TFLM's 16x8 FULLY_CONNECTED): int64 sums, the multiplier rounded to 16 bits, one rounding
REDUCED_ROUNDING = "reduced"

# LOGISTIC and TANH
FLOAT_TABLE = "float_table"  # PopulateLookupTable: the C library's expf / tanhf of each of the 256 inputs
FIXED_POINT = "fixed_point"  # reference_integer_ops::Logistic / Tanh: gemmlowp's fixed-point logistic and tanh
# RSQRT on int16: a table of the float function read interpolated (LiteRT's LUTPopulate / LUTLookup), or each value's
# 1 / sqrt in fixed point (TFLite Micro's RsqrtEvalQuantized: GetInvSqrtQuantizedMultiplierExp, as its int8 kernel)
INTERPOLATED_TABLE = "interpolated_table"


# what a runtime's defective kernel does, as measured (tests/test_conformance.py checks it still does)
DEFECTS = {"SUM": "half of each output's elements are written, the rest left as they were"}


@dataclass(frozen=True)
class Runtime:
    """One runtime of a scheme: its name (a `target.scheme.runtime` choice), what it is, where its kernels come from, and
    the arithmetic of each operator where runtimes differ."""

    name: str
    dialect: str  # the IR dialect whose integers it computes (core/ir/op.py: DIALECTS)
    summary: str
    reference: str  # what simulate checks every layer against, named in its messages
    fully_connected_rounding: str = DOUBLE_ROUNDING
    logistic_tanh: str = FLOAT_TABLE
    # FULLY_CONNECTED of int16 activations (TFLite's 16x8 mode) rescaling its int64 sums: measured on both interpreters
    wide_fully_connected_rounding: str = REDUCED_ROUNDING
    # the int16 SOFTMAX's lookup tables (gen_lut): generated in double (LiteRT) or float (TFLite Micro)
    int16_lut_precision: str = "double"
    # the output multipliers Prepare computes from a product of float32 scales, MUL's s1 x s2 / s_out and RSQRT's
    # 1 / (sqrt(s_in) x s_out): in float32 (LiteRT's mul.cc and elementwise.cc) or in double (TFLite Micro's, measured on
    # the pinned interpreter): the multipliers differ in their low bits, and a product on a rounding boundary 1 LSB apart
    scale_product_precision: str = "double"
    int16_rsqrt: str = INTERPOLATED_TABLE
    # the ReLU operators that clamp their input's integers as they are, taking the output at the input's quantization
    relus_without_requantization: tuple[str, ...] = ()
    # whether an int8 SUM whose output is quantized otherwise than its input is computed: LiteRT's reduce.cc EvalSum drops
    # the failure of QuantizedMeanOrSum and leaves the output unwritten (measured: -1 for every input)
    computes_rescaling_sum: bool = True
    missing_operators: tuple[str, ...] = ()  # TFLite operators its interpreter has no kernel for
    # those whose kernel takes int8 but not int16 (TFLite's 16x8 mode): its interpreter fails the file when it runs it
    missing_int16_operators: tuple[str, ...] = ()
    # those whose int16 kernel runs but writes wrong bytes (measured against the other runtimes and the arithmetic)
    defective_int16_operators: tuple[str, ...] = ()

    def lacks(self, operator: str, bits: int) -> bool:
        """Whether its interpreter has no kernel that computes `operator` on activations of `bits`."""
        return operator in self.missing_operators or (bits == 16 and operator in self.missing_int16_operators + self.defective_int16_operators)

    def why_lacking(self, operator: str, bits: int) -> str:
        """What its interpreter does with an operator it lacks: refuses the file, or computes wrong bytes."""
        if bits == 16 and operator in self.defective_int16_operators:
            return f"its int16 kernel writes wrong bytes: measured, {DEFECTS.get(operator, 'against the other runtimes')}"
        return "its interpreter refuses the file"


RUNTIMES: dict[str, Runtime] = {runtime.name: runtime for runtime in (
    Runtime("tf2ir", "tf2ir",
            "TF2IR's integer arithmetic (seed 000): the accelerator's and the annotated graph's, power-of-two shifts",
            "the annotated graph (fake-quant)"),
    Runtime("litert_reference", "tflite_int8",
            "LiteRT's reference kernels (ai-edge-litert's BUILTIN_REF resolver, TensorFlow Lite's reference_ops): "
            "FULLY_CONNECTED rounds its requantization once (at 16x8 too), LOGISTIC and TANH are float tables",
            "LiteRT's reference kernels", fully_connected_rounding=SINGLE_ROUNDING, logistic_tanh=FLOAT_TABLE,
            wide_fully_connected_rounding=SINGLE_ROUNDING, scale_product_precision="float", computes_rescaling_sum=False,
            defective_int16_operators=("SUM",)),
    Runtime("tflm", "tflite_int8",
            "TensorFlow Lite for Microcontrollers (the tflite-micro interpreter's kernels): FULLY_CONNECTED rounds twice "
            "(gemmlowp), as its convolutions do (at 16x8, as its 16x8 convolutions: the multiplier reduced to 16 bits); "
            "LOGISTIC and TANH in gemmlowp fixed point",
            "TensorFlow Lite for Microcontrollers' interpreter", fully_connected_rounding=DOUBLE_ROUNDING, logistic_tanh=FIXED_POINT,
            wide_fully_connected_rounding=REDUCED_ROUNDING, int16_lut_precision="float", relus_without_requantization=("RELU6",),
            missing_operators=("RELU_N1_TO_1", "RELU_0_TO_1", "GELU", "EXP"),  # EXP: exp.cc takes float32 only
            # its interpreter's own refusals, found by tests/test_conformance.py: reduce.cc's MaxEval "Only float32 and int8
            # types are supported."; resize_bilinear.cc "Output type is 7, requires float or int8."; GATHER of an int16
            # table fails its Prepare
            missing_int16_operators=("REDUCE_MAX", "RESIZE_BILINEAR", "GATHER"), int16_rsqrt=FIXED_POINT),
)}

DEFAULT_TFLITE_RUNTIME = RUNTIMES["litert_reference"]


def runtimes_taking(dialect: str, operators: list[str], bits: int) -> list[str]:
    """The runtimes of `dialect` whose interpreters compute every one of `operators` on activations of `bits`."""
    return [runtime.name for runtime in RUNTIMES.values() if runtime.dialect == dialect
            and not any(runtime.lacks(operator, bits) for operator in operators)]


def runtimes_of(dialect: str) -> list[str]:
    """The runtimes an IR dialect's integers can be made exact against, its default first."""
    return [name for name, runtime in RUNTIMES.items() if runtime.dialect == dialect]


def runtime_named(name: str | None, dialect: str, scheme: str) -> Runtime:
    """`name` (None: the dialect's default) checked against the dialect a scheme emits; a ValueError naming the choices
    otherwise."""
    choices = runtimes_of(dialect)
    if name is None:
        return RUNTIMES[choices[0]]
    if name not in choices:
        raise ValueError(f"target.scheme.runtime={name}: the {scheme} scheme's integers are made exact against "
                         f"{' or '.join(choices)} (target.scheme.runtime={choices[0]} is its default)"
                         + ("; the tflite_int8 scheme (target=tflite_int8, accel_tflite) runs on litert_reference or tflm"
                            if dialect != "tflite_int8" else ""))
    return RUNTIMES[name]
