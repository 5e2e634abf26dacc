"""The compiled passes of the evaluation (core/quantize/evaluation.py) against numpy in float64:
the error sums annotate's SQNR and cosine come from, and simulate's grid agreement."""

from __future__ import annotations

import numpy as np
import hypothesis.extra.numpy as hnp
from hypothesis import given, settings
from hypothesis import strategies as st

from core.quantize.evaluation import SQNR_CAP_DB, ErrorSums, grid_agreement, sqnr_db

finite = st.floats(-1e4, 1e4, width=32, allow_nan=False, allow_infinity=False)
pairs = st.integers(1, 3000).flatmap(lambda n: st.tuples(hnp.arrays(np.float32, n, elements=finite),
                                                         hnp.arrays(np.float32, n, elements=finite)))


@settings(max_examples=100, deadline=None)
@given(pairs)
def test_error_sums_are_the_float64_dot_products(pair):
    reference, quantized = pair
    sums = ErrorSums()
    sums.add(reference.reshape(-1, 1), quantized.reshape(-1, 1))
    f, q = reference.astype(np.float64), quantized.astype(np.float64)
    for ours, theirs in zip((sums.signal, sums.quantized, sums.cross, sums.noise), (f @ f, q @ q, f @ q, (f - q) @ (f - q))):
        assert np.isclose(ours, theirs, rtol=1e-12, atol=1e-9)


def test_identical_tensors_have_no_noise_in_any_dtype():
    values = np.random.default_rng(0).normal(size=(4, 7, 7, 3)).astype(np.float32)
    assert sqnr_db(values, values.copy()) == SQNR_CAP_DB
    assert sqnr_db(values.astype(np.float64), values.astype(np.float64)) == SQNR_CAP_DB


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 12), hnp.arrays(np.int8, st.integers(1, 500)), st.data())
def test_grid_agreement_is_the_float64_rounding_it_replaces(log2scale, integers, data):
    """Values on the grid (a FakeQuant's output), some off by a step or half a step (rint: half to even)."""
    offsets = data.draw(hnp.arrays(np.float32, integers.size, elements=st.sampled_from([0.0, 0.0, 0.5, -0.5, 1.0, 2.5, -3.0])))
    values = ((integers.astype(np.float32) + offsets) * np.float32(2.0**-log2scale)).astype(np.float32)
    equal, largest = grid_agreement(values, np.float32(2.0**log2scale), integers)
    expected = np.abs(np.rint(values.astype(np.float64) * 2.0**log2scale).astype(np.int64) - integers.astype(np.int64))
    assert (int(equal), int(largest)) == (int(np.count_nonzero(expected == 0)), int(expected.max()))
