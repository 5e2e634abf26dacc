"""Lossless weight compression (core/backends/accel/compression.py): the round trip on any int8 data, a damaged stream
refused, and compressed LOADs decoded by the C ISA simulator into the weights the host kernels multiply (every output byte
of MLCommons' int8 visual wake words, whose channel padding and pruned weights compress), with the bytes read from flash
and the constant segment counted at their compressed size."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import MODELS, PROJECT_ROOT
from test_accel_cost import assert_the_host_kernels_bytes
from core.backends.accel.compression import GROUP, RICE, RUNS, CompressionError, compress, decompress
from core.backends.accel.isa import Load
from core.backends.accel.partition import partition
from core.backends.accel.target import load_target
from core.backends.program import generate_program
from core.frontend.tflite import read_tflite
from core.ir.tflite_ir import ir_of_tflite

VWW = MODELS / "mlperf_tiny_vww" / "vww_96_int8.tflite"
AD = MODELS / "mlperf_tiny_ad" / "ad01_int8.tflite"
int8_values = st.one_of(st.integers(-128, 127), st.just(0), st.sampled_from([-128, 127, -1, 1]))


@settings(max_examples=300, deadline=None)
@given(st.lists(int8_values, max_size=5 * GROUP + 3))
def test_any_int8_data_comes_back_from_its_stream_byte_for_byte(values):
    raw = np.array(values, np.int8).tobytes()
    stream = compress(raw)
    assert decompress(stream, len(raw)) == raw
    assert len(stream) <= -(-len(raw) // GROUP) * (1 + GROUP)  # at worst 8 bits a value and a header byte a group


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.5, 2.0, 6.0, 20.0]), st.integers(1, 6 * RUNS * GROUP))
def test_bell_shaped_weights_come_back_from_their_rice_runs(seed, spread, count):
    """Dense weights of a bell-shaped distribution (a fully connected layer's): Rice runs, any length, any spread."""
    raw = np.random.default_rng(seed).normal(0, spread, count).round().clip(-128, 127).astype(np.int8).tobytes()
    assert decompress(compress(raw), len(raw)) == raw


def test_a_rice_run_takes_what_its_codes_need():
    """RUNS groups of -1, 0, 1, 0, ... (zigzag codes 1, 0, 2, 0): one run at k = 0, the unary codes 10, 0, 110, 0, 7 bits
    a 4, and a header; plain groups would take 1 + 4 bytes each."""
    values = np.tile(np.array([-1, 0, 1, 0], np.int8), RUNS * GROUP // 4).tobytes()
    stream = compress(values)
    assert stream[0] == RICE | (RUNS - 1) << 3 and len(stream) == 1 + RUNS * GROUP // 4 * 7 // 8


def test_zeros_few_values_and_small_values_take_fewer_bytes():
    assert len(compress(bytes(64))) == 64 // GROUP  # a header alone per group of zeros
    small = np.tile(np.array([-2, -1, 0, 1], np.int8), 16).tobytes()  # zigzag codes 0..3: 2 bits a value
    assert len(compress(small)) == len(small) // GROUP * (1 + GROUP * 2 // 8)
    one_channel = np.zeros((4, GROUP), np.int8)
    one_channel[:, 0] = [-128, 127, 5, -7]  # a block row of one input channel: a header, a mask and one value
    assert len(compress(one_channel.tobytes())) == 4 * (1 + 2 + 1)


@pytest.mark.parametrize("stream, message", [(bytes([9]) + bytes(18), "header 0x09"), (bytes([8]) + bytes(3), "needs 17 bytes"),
                                             (b"", "ends after 0 bytes"), (bytes([0x88, 1]), "before its mask"),
                                             (bytes([RICE | 0x80]), "with the mask bit"), (bytes([RICE, 0xFF]), "ends before its 16 values"),
                                             (bytes([RICE]) + b"\xff" * 40, "past the int8s' 255")])
def test_a_damaged_stream_is_refused(stream, message):
    with pytest.raises(CompressionError, match=message):
        decompress(stream, GROUP)


def test_compressed_weights_decode_on_the_isa_simulator_to_every_output_byte_of_the_host_kernels(tmp_path):
    """MLCommons' visual wake words on accel_tflite: its layers' weights compressed, those its tiles read in parts a stream
    a part, the same instructions as uncompressed, every output byte of the host kernels."""
    if not VWW.exists():
        pytest.skip(f"needs {VWW}")
    _, compressing = load_target(PROJECT_ROOT / "conf" / "target" / "accel_tflite.yaml")
    assert compressing.weight_compression
    ir = ir_of_tflite(read_tflite(VWW))
    programs = {on: generate_program(ir, partition(ir, dataclasses.replace(compressing, weight_compression=on))) for on in (False, True)}
    compressed = [i for f in programs[True].functions for i in f.instructions if isinstance(i, Load) and i.stream]
    assert compressed and all(i.const and i.buffer in ("WGT", "WGTV") for i in compressed)
    # in 48 KiB on chip, a wide layer's weights stream through the weight buffer a part a tile: each part compressed alone
    weighted = [layer for layer in ir.layers if layer.operation in ("conv", "dwconv")]
    assert len({i.dram for i in compressed}) > len(weighted)
    # the same instructions but the compressed loads' streams; the constant segment and the bytes read from flash shrink
    plain, packed = (programs[on].statistics for on in (False, True))
    assert plain["instructions"] == packed["instructions"] and packed["load_bytes"] < plain["load_bytes"]
    assert programs[True].accel_constant_bytes < programs[False].accel_constant_bytes
    # (the raw figure differs by the alignment of each constant)
    assert programs[True].accel_constant_raw_bytes == pytest.approx(programs[False].accel_constant_bytes, rel=0.01)
    assert_the_host_kernels_bytes(ir, programs[True], tmp_path)


def test_rice_coded_dense_weights_decode_on_the_isa_simulator_to_every_output_byte_of_the_host_kernels(tmp_path):
    """MLCommons' anomaly detection, ten dense layers of bell-shaped int8 weights: their streams hold Rice runs, which the
    C simulator's DMA decodes into the weights the host kernels multiply."""
    if not AD.exists():
        pytest.skip(f"needs {AD}")
    _, accelerator = load_target(PROJECT_ROOT / "conf" / "target" / "accel_tflite.yaml")
    ir = ir_of_tflite(read_tflite(AD))
    program = generate_program(ir, partition(ir, accelerator))
    loads = [i for f in program.functions for i in f.instructions if isinstance(i, Load) and i.stream]
    assert loads and any(program.accel_constants[load.dram] & RICE for load in loads), "no stream starts with a Rice run"
    assert program.accel_constant_bytes < 0.75 * program.accel_constant_raw_bytes
    assert_the_host_kernels_bytes(ir, program, tmp_path)
