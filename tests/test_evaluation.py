"""The compiled passes of the evaluation (core/quantize/evaluation.py) against numpy in float64:
the error sums annotate's SQNR and cosine come from, and simulate's grid agreement; the end points
annotate keeps for simulate, served only for the images they were computed on."""

from __future__ import annotations

import numpy as np
import hypothesis.extra.numpy as hnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.quantize.evaluation import (END_POINTS_DIR, SQNR_CAP_DB, EndPointRecorder, ErrorSums, KeptEndPoints,
                                      KeptEndPointsError, grid_agreement, sqnr_db)

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


def _recorded(images: np.ndarray, batch: int, limit_bytes: int, directory) -> bool:
    """Two made-up end points per image ([N, 3] and [N, 2, 2]) of two graphs, recorded batch by batch."""
    recorder = EndPointRecorder(limit_bytes)
    for start in range(0, len(images), batch):
        chunk = images[start : start + batch]
        reference = [chunk.sum(axis=(1, 2)), chunk[:, :2, :2, 0]]
        recorder(reference, [np.round(value) for value in reference])
    return recorder.save(directory, "content of the images")


def test_kept_end_points_are_every_images_in_order_and_only_for_those_images(tmp_path):
    images = np.random.default_rng(0).normal(size=(10, 4, 4, 3)).astype(np.float32)
    assert _recorded(images, 3, 1 << 20, tmp_path)
    kept = KeptEndPoints.load(tmp_path, 10, "content of the images", 2)
    reference, annotated = kept.batch(4, 5)  # across the recorder's batches
    assert np.array_equal(reference[0], images[4:9].sum(axis=(1, 2))) and np.array_equal(reference[1], images[4:9, :2, :2, 0])
    assert np.array_equal(annotated[1], np.round(images[4:9, :2, :2, 0]))
    assert KeptEndPoints.load(tmp_path, 10, "content of other images", 2) is None  # the graphs run again
    assert KeptEndPoints.load(tmp_path, 9, "content of the images", 2) is None
    assert KeptEndPoints.load(tmp_path, 10, "content of the images", 3) is None


def test_end_points_over_the_limit_are_not_kept_at_all(tmp_path):
    images = np.random.default_rng(1).normal(size=(10, 4, 4, 3)).astype(np.float32)
    per_image = (3 + 4) * 4 * 2  # float32 values of both graphs
    assert not _recorded(images, 4, 9 * per_image, tmp_path)  # the third batch goes over
    assert not (tmp_path / END_POINTS_DIR).exists() and KeptEndPoints.load(tmp_path, 10, "content of the images", 2) is None
    assert _recorded(images, 4, 10 * per_image, tmp_path)


@pytest.mark.parametrize("file, content, message", [
    ("index.json", b"[1, 2]", "a JSON list, an object expected"),
    ("index.json", b"\xff{", "not JSON"),
    ("annotated_1.npy", b"not an array", "unreadable as .npy"),
])
def test_damaged_kept_end_points_are_refused_naming_the_file(tmp_path, file, content, message):
    images = np.random.default_rng(2).normal(size=(6, 4, 4, 3)).astype(np.float32)
    assert _recorded(images, 4, 1 << 20, tmp_path)
    (tmp_path / END_POINTS_DIR / file).write_bytes(content)
    with pytest.raises(KeptEndPointsError, match=message) as error:
        KeptEndPoints.load(tmp_path, 6, "content of the images", 2)
    assert str(tmp_path / END_POINTS_DIR / file) in str(error.value) and "run annotate again" in str(error.value)


def test_a_kept_end_point_of_the_wrong_length_is_refused(tmp_path):
    images = np.random.default_rng(3).normal(size=(6, 4, 4, 3)).astype(np.float32)
    assert _recorded(images, 4, 1 << 20, tmp_path)
    np.save(tmp_path / END_POINTS_DIR / "reference_0.npy", np.zeros((5, 3), np.float32))
    with pytest.raises(KeptEndPointsError, match=r"float32 \[5, 3\], 6 images of numbers expected"):
        KeptEndPoints.load(tmp_path, 6, "content of the images", 2)
