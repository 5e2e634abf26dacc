import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from core.data.datasets import (
    DatasetError,
    Preprocess,
    load_cifar10,
    load_cifar10_label_names,
    load_digits_split,
    load_image,
    load_image_files,
    load_preprocessed_images,
    preprocess,
)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = PROJECT_ROOT.parent / "shared"
CIFAR_DIR = SHARED / "data" / "cifar-10-batches-py"
MODELS_DIR = SHARED / "models"
MBV1_DIR = MODELS_DIR / "mobilenet_v1_0.5_128_cifar10"

MBV1_PREPROCESS = {"size": [128, 128], "channels": 3, "resize": "tf_bilinear", "scale": 127.5, "offset": -1.0}
SSD_PREPROCESS = {"size": [160, 160], "channels": 3, "resize": "pil_bilinear", "scale": 128.0, "offset": -1.0}
DIGITS_PREPROCESS = {"size": [8, 8], "channels": 1, "resize": None, "scale": 8.0, "offset": -1.0}


def raw_cifar_rows(batch_name):
    with open(CIFAR_DIR / batch_name, "rb") as file:
        return pickle.load(file, encoding="bytes")[b"data"]


# --- CIFAR-10 ---------------------------------------------------------------
@pytest.mark.parametrize("batch_name, count", [("test_batch", 846), ("data_batch_1", 932)])
def test_cifar10_batches_load_with_shapes_and_labels(batch_name, count):
    images, labels = load_cifar10(CIFAR_DIR, batch_name)
    assert images.shape == (count, 32, 32, 3) and images.dtype == np.uint8
    assert labels.shape == (count,) and labels.dtype == np.int64
    assert set(labels.tolist()) == set(range(10))


def test_cifar10_rows_become_hwc_with_red_plane_first():
    images, _ = load_cifar10(CIFAR_DIR, "test_batch")
    rows = raw_cifar_rows("test_batch")
    for index in (0, 417, 845):
        row = rows[index]
        np.testing.assert_array_equal(images[index], row.reshape(3, 32, 32).transpose(1, 2, 0))
        # the first 1024 values are the red plane, row-major: pixel (y, x) is row[32 * y + x]
        assert images[index, 5, 7, 0] == row[32 * 5 + 7]
        assert images[index, 5, 7, 2] == row[2048 + 32 * 5 + 7]


def test_cifar10_label_names():
    names = load_cifar10_label_names(CIFAR_DIR)
    assert len(names) == 10 and names[8] == "ship" and names[1] == "automobile"


def test_mbv1_preprocessing_reproduces_its_documented_accuracy():
    # models/README.md: 77.8% top-1 on these 846 images with this preprocessing; a wrong
    # channel order or resize would lose several points
    import tensorflow as tf

    images, labels = load_cifar10(CIFAR_DIR, "test_batch")
    inputs = preprocess(images, MBV1_PREPROCESS)
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString((MBV1_DIR / "graph.pb").read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        logits = session.run("MobilenetV1/Dense/act_quant/FakeQuantWithMinMaxVars:0", {"images:0": inputs})
    correct = int(np.sum(logits.reshape(len(labels), 10).argmax(axis=1) == labels))
    assert correct == 658  # 658 / 846 = 77.8%


# --- preprocessing ----------------------------------------------------------
def test_mbv1_preprocess_maps_0_and_255_to_the_ends_of_minus_one_one():
    images = np.zeros((2, 32, 32, 3), np.uint8)
    images[1] = 255
    inputs = preprocess(images, MBV1_PREPROCESS)
    assert inputs.shape == (2, 128, 128, 3) and inputs.dtype == np.float32
    assert np.all(inputs[0] == -1.0) and np.all(inputs[1] == 1.0)


def test_tf_bilinear_keeps_a_real_image_in_range():
    image = load_image(MBV1_DIR / "ship.png")
    inputs = preprocess(image[np.newaxis], MBV1_PREPROCESS)
    assert inputs.shape == (1, 128, 128, 3)
    assert -1.0 <= inputs.min() and inputs.max() <= 1.0


def test_pil_bilinear_matches_the_original_ssd_feeding():
    path = MODELS_DIR / "mobilenet_v2_ssd_0.25_160" / "test.jpg"
    expected = np.asarray(Image.open(path).convert("RGB").resize((160, 160), Image.BILINEAR), np.float32) / 128.0 - 1.0
    inputs = preprocess(load_image(path)[np.newaxis], SSD_PREPROCESS)
    assert inputs.shape == (1, 160, 160, 3)
    np.testing.assert_allclose(inputs[0], expected, atol=1e-6)


def test_pil_bilinear_accepts_float_images():
    images = np.full((1, 10, 20, 3), 100.0, np.float32)
    inputs = preprocess(images, SSD_PREPROCESS)
    assert inputs.shape == (1, 160, 160, 3)
    np.testing.assert_allclose(inputs, 100.0 / 128.0 - 1.0, atol=1e-6)


def test_digits_preprocess_maps_0_and_16_to_minus_one_and_one():
    images = np.stack([np.zeros((8, 8, 1)), np.full((8, 8, 1), 16.0)]).astype(np.float32)
    inputs = preprocess(images, DIGITS_PREPROCESS)
    assert inputs.shape == (2, 8, 8, 1)
    assert np.all(inputs[0] == -1.0) and np.all(inputs[1] == 1.0)


def test_preprocess_rejects_a_channel_count_the_model_does_not_take():
    with pytest.raises(DatasetError, match="4 channels; the model expects 3"):
        preprocess(np.zeros((1, 32, 32, 4), np.uint8), MBV1_PREPROCESS)


def test_preprocess_rejects_a_size_it_may_not_resize():
    with pytest.raises(DatasetError, match="resize is 'none'"):
        preprocess(np.zeros((1, 10, 10, 1), np.float32), DIGITS_PREPROCESS)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({**MBV1_PREPROCESS, "resize": "bicubic"}, "expected one of"),
        ({**MBV1_PREPROCESS, "mean": 0.5}, "unknown preprocess settings"),
        ({**MBV1_PREPROCESS, "scale": 0}, "scale is 0"),
    ],
)
def test_bad_preprocess_settings_are_named(settings, message):
    with pytest.raises(DatasetError, match=message):
        Preprocess.from_config(settings)


# --- image files ------------------------------------------------------------
def test_image_files_are_listed_sorted_and_filtered():
    assert [p.name for p in load_image_files(MBV1_DIR)] == ["automobile.png", "ship.png"]
    assert [p.name for p in load_image_files(MODELS_DIR)] == ["motor.jpg", "oiltank.jpg"]
    assert load_image_files(MODELS_DIR / "motor.jpg") == [MODELS_DIR / "motor.jpg"]


def test_load_image_rgb_and_single_channel():
    rgb = load_image(MBV1_DIR / "ship.png")
    gray = load_image(MBV1_DIR / "ship.png", channels=1)
    assert rgb.shape == (32, 32, 3) and rgb.dtype == np.uint8
    assert gray.shape == (32, 32, 1) and gray.dtype == np.uint8


def test_grayscale_and_rgba_files_become_rgb(tmp_path):
    Image.fromarray(np.full((4, 5), 77, np.uint8), mode="L").save(tmp_path / "gray.png")
    rgba = np.zeros((4, 5, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, 255
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "rgba.PNG")
    gray = load_image(tmp_path / "gray.png")
    assert gray.shape == (4, 5, 3) and np.all(gray == 77)
    color = load_image(tmp_path / "rgba.PNG")
    assert color.shape == (4, 5, 3) and np.all(color[..., 0] == 200) and np.all(color[..., 1:] == 0)
    assert [p.name for p in load_image_files(tmp_path)] == ["gray.png", "rgba.PNG"]


def test_images_of_different_sizes_load_as_one_preprocessed_batch():
    batch, files = load_preprocessed_images(MODELS_DIR, SSD_PREPROCESS)
    assert batch.shape == (2, 160, 160, 3) and batch.dtype == np.float32
    assert [p.name for p in files] == ["motor.jpg", "oiltank.jpg"]


# --- sklearn digits ---------------------------------------------------------
def test_digits_split_is_stratified_raw_and_deterministic():
    split = load_digits_split(0.2, seed=0)
    assert split.train_images.shape == (1437, 8, 8, 1) and split.test_images.shape == (360, 8, 8, 1)
    assert split.train_images.dtype == np.float32 and split.test_labels.dtype == np.int64
    assert split.train_images.min() == 0.0 and split.train_images.max() == 16.0
    all_counts = np.bincount(np.concatenate([split.train_labels, split.test_labels]))
    assert np.all(np.abs(np.bincount(split.test_labels) - 0.2 * all_counts) <= 1)

    again = load_digits_split(0.2, seed=0)
    np.testing.assert_array_equal(split.test_images, again.test_images)
    np.testing.assert_array_equal(split.test_labels, again.test_labels)
    other = load_digits_split(0.2, seed=1)
    assert not np.array_equal(split.test_labels, other.test_labels)


@pytest.mark.parametrize("fraction", [0.0, 1.0, 1.5])
def test_digits_split_rejects_a_fraction_outside_0_1(fraction):
    with pytest.raises(DatasetError, match="holdout_fraction"):
        load_digits_split(fraction, seed=0)


# --- errors -----------------------------------------------------------------
def test_missing_cifar_directory_says_what_is_expected(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetError) as raised:
        load_cifar10(missing, "test_batch")
    message = str(raised.value)
    assert str(missing) in message and "data_batch_1" in message and "data.path" in message
    assert isinstance(raised.value, ValueError)


def test_missing_cifar_batch_is_named(tmp_path):
    with pytest.raises(DatasetError, match="data_batch_3 not found"):
        load_cifar10(CIFAR_DIR, "data_batch_3")


@pytest.mark.parametrize("name", ["../test_batch", "/etc/passwd", "cifar/../test_batch"])
def test_a_batch_name_is_never_a_path(tmp_path, name):
    (tmp_path / "test_batch").write_bytes(b"outside the data directory")
    (tmp_path / "cifar").mkdir()
    with pytest.raises(DatasetError, match="is not a CIFAR-10 batch; choose one of data_batch_1"):
        load_cifar10(tmp_path / "cifar", name)


def test_a_file_that_is_not_a_pickle_is_rejected(tmp_path):
    (tmp_path / "test_batch").write_bytes(b"this is not a pickle")
    with pytest.raises(DatasetError, match="not a CIFAR-10 python-version pickle"):
        load_cifar10(tmp_path, "test_batch")


@pytest.mark.parametrize(
    "batch, message",
    [
        ({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, r"expected uint8 \[N, 3072\]"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}, "1 labels for 2 images"),
        ({b"data": np.zeros((1, 3072), np.uint8), b"labels": [10]}, "labels outside"),
        ({"data": np.zeros((1, 3072), np.uint8)}, "expected a dict with b'data'"),
    ],
)
def test_a_pickle_of_the_wrong_form_is_rejected(tmp_path, batch, message):
    with open(tmp_path / "test_batch", "wb") as file:
        pickle.dump(batch, file)
    with pytest.raises(DatasetError, match=message):
        load_cifar10(tmp_path, "test_batch")


class _Payload:
    """What a crafted batch file can do: call any function it names while it is unpickled."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.makedirs, (str(self.marker),)


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_a_batch_file_that_names_code_is_refused_without_running_it(tmp_path, protocol):
    marker = tmp_path / "the payload ran"
    batch = {b"data": np.zeros((1, 3072), np.uint8), b"labels": [0], b"filenames": [_Payload(marker)]}
    (tmp_path / "cifar").mkdir()
    with open(tmp_path / "cifar" / "data_batch_1", "wb") as file:
        pickle.dump(batch, file, protocol=protocol)
    with pytest.raises(DatasetError, match=r"data_batch_1 is not a CIFAR-10 .*it names (os|posix)\.makedirs, .*refused"):
        load_cifar10(tmp_path / "cifar", "data_batch_1")
    assert not marker.exists()
    # the same dict without the payload, pickled the same way, loads
    with open(tmp_path / "cifar" / "data_batch_1", "wb") as file:
        pickle.dump({b"data": np.zeros((1, 3072), np.uint8), b"labels": [0]}, file, protocol=protocol)
    assert load_cifar10(tmp_path / "cifar", "data_batch_1")[0].shape == (1, 32, 32, 3)


@pytest.mark.parametrize("channels", [1, 3])
def test_a_16_bit_png_is_scaled_to_8_bits_not_clipped(tmp_path, channels):
    samples = np.linspace(0, 65535, 64 * 64).round().astype(np.uint16).reshape(64, 64)
    Image.fromarray(samples).save(tmp_path / "deep.png")
    with Image.open(tmp_path / "deep.png") as written:
        assert written.mode.startswith("I")  # a real 16-bit PNG
    loaded = load_image(tmp_path / "deep.png", channels)
    expected = np.round(samples / 257.0).astype(np.uint8)  # 65535 / 255 = 257
    np.testing.assert_array_equal(loaded[..., 0], expected)
    assert loaded.shape == (64, 64, channels) and np.mean(loaded == 255) < 0.01


def test_a_directory_without_images_is_rejected(tmp_path):
    (tmp_path / "notes.txt").write_text("no images here")
    with pytest.raises(DatasetError, match="no images in"):
        load_image_files(tmp_path)
    with pytest.raises(DatasetError, match="does not exist"):
        load_image_files(tmp_path / "missing")


def test_an_undecodable_image_is_named(tmp_path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(DatasetError, match="cannot decode image .*broken.jpg"):
        load_image(broken)


def test_an_unsupported_channel_count_is_rejected():
    with pytest.raises(DatasetError, match="expected 1 or 3"):
        load_image(MBV1_DIR / "ship.png", channels=4)


def test_pil_nearest_is_the_original_tools_feeding_and_the_ssd_models_setting():
    """The TF2IR tool called PIL's resize with its 2019 default filter, NEAREST: every output pixel
    is one of the image's own pixels, and that is what conf/model/ssd_mbv2.yaml asks for."""
    path = MODELS_DIR / "mobilenet_v2_ssd_0.25_160" / "test.jpg"
    image = load_image(path)
    expected = np.asarray(Image.open(path).convert("RGB").resize((160, 160), Image.NEAREST), np.float32) / 128.0 - 1.0
    nearest = {**SSD_PREPROCESS, "resize": "pil_nearest"}
    inputs = preprocess(image[np.newaxis], nearest)
    np.testing.assert_allclose(inputs[0], expected, atol=1e-6)
    pixels = {tuple(p) for p in image.reshape(-1, 3)}
    assert {tuple(p) for p in np.rint((inputs[0] + 1.0) * 128.0).astype(int).reshape(-1, 3)} <= pixels
    assert not np.allclose(inputs, preprocess(image[np.newaxis], SSD_PREPROCESS))  # bilinear blends
    assert yaml.safe_load((PROJECT_ROOT / "conf" / "model" / "ssd_mbv2.yaml").read_text())["preprocess"]["resize"] == "pil_nearest"


def test_a_splits_content_digest_is_what_its_images_are_made_from_not_where_they_are(tmp_path):
    """annotate's kept end points are served to simulate by this digest: the same files elsewhere are the
    same images; another file, another count or another preprocessing are not."""
    import shutil

    from core.data.datasets import load_split

    first, second = tmp_path / "first", tmp_path / "second"
    for directory in (first, second):
        directory.mkdir()
        for name in ("motor.jpg", "oiltank.jpg"):
            shutil.copy(MODELS_DIR / name, directory / name)

    def content(path, settings=SSD_PREPROCESS, **options):
        return load_split("images", path, "all", settings, **options).images.content

    assert content(first) == content(second)
    assert content(first, limit=1) != content(first)
    assert content(first, settings={**SSD_PREPROCESS, "offset": 0.0}) != content(first)
    (second / "motor.jpg").write_bytes((first / "oiltank.jpg").read_bytes())
    assert content(second) != content(first)

    def digits(split, **options):
        return load_split("digits", None, split, DIGITS_PREPROCESS, **options).images.content

    assert digits("test") == digits("test") != digits("train")
    assert digits("test", limit=10) != digits("test")
