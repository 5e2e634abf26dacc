"""Calibration and evaluation data: CIFAR-10 batches, image files, sklearn digits.

Every loader returns numpy arrays: raw images as NHWC (uint8 for files and
CIFAR, float32 0..16 for digits), labels as int64. `preprocess` turns raw
images into what a model's input placeholder expects (float32 NHWC), driven by
the model config's `Preprocess` settings, so calibration and evaluation feed
exactly what the float model was trained and measured with.
"""

from __future__ import annotations

import hashlib
import pickle
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from core.data.arrays import ARRAY_SPLITS, check_arrays, load_arrays
from core.data.errors import DatasetError
from core.limits import MemoryBudget, elements

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
# pil_nearest: Pillow's default filter when the original TF2IR tool produced its test vectors (2019)
RESIZE_METHODS = ("tf_bilinear", "pil_bilinear", "pil_nearest", "none")
PIL_FILTERS = {"pil_bilinear": "BILINEAR", "pil_nearest": "NEAREST"}

CIFAR10_SIDE = 32
CIFAR10_ROW_LENGTH = 3 * CIFAR10_SIDE * CIFAR10_SIDE
CIFAR10_CLASSES = 10
CIFAR10_BATCHES = (*(f"data_batch_{k}" for k in range(1, 6)), "test_batch")  # the only files a split may name
CIFAR10_EXPECTED = "the CIFAR-10 python version directory containing data_batch_1 ... data_batch_5, test_batch and batches.meta; set data.path"

DIGITS_CLASSES = 10


# --- preprocessing ----------------------------------------------------------
@dataclass(frozen=True)
class Preprocess:
    """Raw image -> model input: optional resize to `size`, then `x / scale + offset`."""

    size: tuple[int, int] | None = None  # [H, W]; None keeps the input size
    channels: int = 3
    resize: str = "none"
    scale: float = 1.0
    offset: float = 0.0

    def __post_init__(self) -> None:
        if self.resize not in RESIZE_METHODS:
            raise DatasetError(f"preprocess.resize is {self.resize!r}; expected one of {', '.join(RESIZE_METHODS)}")
        if self.resize != "none" and self.size is None:
            raise DatasetError(f"preprocess.resize is {self.resize!r} but preprocess.size is not set")
        if self.size is not None and (len(self.size) != 2 or min(self.size) < 1):
            raise DatasetError(f"preprocess.size is {list(self.size)}; expected [height, width] of positive integers")
        if self.channels not in (1, 3):
            raise DatasetError(f"preprocess.channels is {self.channels}; expected 1 or 3")
        if self.scale == 0:
            raise DatasetError("preprocess.scale is 0; the affine is x / scale + offset")

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | "Preprocess") -> "Preprocess":
        """From the model config's plain mapping (Hydra DictConfig works too); unknown keys are errors."""
        if isinstance(config, Preprocess):
            return config
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise DatasetError(f"unknown preprocess settings {unknown}; expected some of {sorted(known)}")
        values = dict(config)
        if values.get("size") is not None:
            values["size"] = tuple(int(side) for side in values["size"])
        if values.get("resize") is None:
            values["resize"] = "none"
        for key in ("scale", "offset"):
            if key in values:
                values[key] = float(values[key])
        if "channels" in values:
            values["channels"] = int(values["channels"])
        return cls(**values)


def preprocess(images: np.ndarray, settings: Mapping[str, Any] | Preprocess) -> np.ndarray:
    """NHWC uint8 or float images -> float32 NHWC model input."""
    settings = Preprocess.from_config(settings)
    images = np.asarray(images)
    if images.ndim != 4:
        raise DatasetError(f"expected NHWC images, got an array of shape {list(images.shape)}")
    if images.shape[-1] != settings.channels:
        raise DatasetError(f"images have {images.shape[-1]} channels; the model expects {settings.channels}")
    resized = _resize(images, settings)
    return resized.astype(np.float32) / np.float32(settings.scale) + np.float32(settings.offset)


def _resize(images: np.ndarray, settings: Preprocess) -> np.ndarray:
    if settings.size is None or tuple(images.shape[1:3]) == settings.size:
        return images
    if settings.resize == "none":
        raise DatasetError(f"images are {list(images.shape[1:3])} and preprocess.resize is 'none', but the model expects {list(settings.size)}")
    if settings.resize == "tf_bilinear":
        import tensorflow as tf

        # TF2's resize: half-pixel centers, no antialiasing; float32 out, no rounding
        return tf.image.resize(images, settings.size, method="bilinear").numpy()
    return np.stack([_pil_resize(image, settings.size, PIL_FILTERS[settings.resize]) for image in images])


def _pil_resize(image: np.ndarray, size: tuple[int, int], filter_name: str) -> np.ndarray:
    from PIL import Image

    height, width = size
    resample = getattr(Image, filter_name)
    if image.dtype == np.uint8 and image.shape[-1] in (1, 3):
        # the uint8 path is what the original tools ran (PIL rounds back to uint8)
        mode_image = Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image)
        resized = np.asarray(mode_image.resize((width, height), resample))
        return resized.reshape(height, width, image.shape[-1])
    # float input: resize each channel in PIL's 32-bit float mode, keeping values unrounded
    channels = [
        np.asarray(Image.fromarray(image[..., c].astype(np.float32), mode="F").resize((width, height), resample))
        for c in range(image.shape[-1])
    ]
    return np.stack(channels, axis=-1)


# --- CIFAR-10 ---------------------------------------------------------------
def load_cifar10(directory: str | Path, batch_name: str) -> tuple[np.ndarray, np.ndarray]:
    """One batch of the official python-version CIFAR-10 -> (uint8 [N,32,32,3] HWC, int64 labels)."""
    path = _cifar10_file(directory, batch_name)
    batch = _unpickle_cifar(path)
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise DatasetError(f"{path} is not a CIFAR-10 batch: expected a dict with b'data' and b'labels'")
    rows = np.asarray(batch[b"data"])
    labels = np.asarray(batch[b"labels"])
    if rows.dtype != np.uint8 or rows.ndim != 2 or rows.shape[1] != CIFAR10_ROW_LENGTH:
        raise DatasetError(f"{path}: b'data' is {rows.dtype} {list(rows.shape)}; expected uint8 [N, {CIFAR10_ROW_LENGTH}]")
    if labels.shape != (rows.shape[0],):
        raise DatasetError(f"{path}: {labels.size} labels for {rows.shape[0]} images")
    if labels.size and (labels.min() < 0 or labels.max() >= CIFAR10_CLASSES):
        raise DatasetError(f"{path}: labels outside 0..{CIFAR10_CLASSES - 1}")
    # each row is channel-major: 1024 R, then G, then B, each a row-major 32x32 plane
    images = rows.reshape(-1, 3, CIFAR10_SIDE, CIFAR10_SIDE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels.astype(np.int64)


def load_cifar10_label_names(directory: str | Path) -> list[str]:
    """Class names from batches.meta, index = label."""
    path = _cifar10_file(directory, "batches.meta")
    meta = _unpickle_cifar(path)
    if not isinstance(meta, dict) or b"label_names" not in meta:
        raise DatasetError(f"{path} is not CIFAR-10 batches.meta: expected a dict with b'label_names'")
    return [name.decode() if isinstance(name, bytes) else str(name) for name in meta[b"label_names"]]


def _cifar10_file(directory: str | Path, name: str) -> Path:
    if name not in (*CIFAR10_BATCHES, "batches.meta"):  # a name is never a path: nothing outside the directory is read
        raise DatasetError(f"{name!r} is not a CIFAR-10 batch; choose one of {', '.join(CIFAR10_BATCHES)}")
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetError(f"{directory} does not exist or is not a directory; expected {CIFAR10_EXPECTED}")
    path = directory / name
    if not path.is_file():
        present = sorted(p.name for p in directory.iterdir())
        raise DatasetError(f"{path} not found (the directory holds {present}); expected {CIFAR10_EXPECTED}")
    return path


class _CifarUnpickler(pickle.Unpickler):
    """The official format holds dicts, lists, bytes, str, int and numpy arrays; a pickle may
    name any callable to run, so every other global is refused before it is looked up."""

    ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
               ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.numeric", "_frombuffer"),  # protocol 5's arrays
               ("numpy._core.numeric", "_frombuffer"), ("_codecs", "encode")}  # encode: protocol 2's bytes

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which the CIFAR-10 format never holds; refused "
                                         "(a pickle can run any code it names)")
        return super().find_class(module, name)


def _unpickle_cifar(path: Path) -> Any:
    try:
        with open(path, "rb") as file:
            return _CifarUnpickler(file, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError, IndexError, KeyError) as error:
        raise DatasetError(f"{path} is not a CIFAR-10 python-version pickle ({type(error).__name__}: {error})") from error


# --- image files ------------------------------------------------------------
def load_image_files(directory_or_file: str | Path) -> list[Path]:
    """A single image file, or the sorted .jpg/.jpeg/.png files directly inside a directory."""
    path = Path(directory_or_file)
    if path.is_file():
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            raise DatasetError(f"{path} is not an image file; expected one of {', '.join(IMAGE_SUFFIXES)}")
        return [path]
    if not path.is_dir():
        raise DatasetError(f"{path} does not exist; expected an image file or a directory of {', '.join(IMAGE_SUFFIXES)} files")
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise DatasetError(f"no images in {path}; expected {', '.join(IMAGE_SUFFIXES)} files")
    return files


WIDE_GRAY_MODES = ("I;16", "I;16L", "I;16B", "I")  # 16-bit grayscale PNGs open as one of these


def _eight_bit(values: np.ndarray, mode: str, path: str | Path) -> np.ndarray:
    """16-bit samples scaled to 8 bits (v * 255 / 65535, rounded), as an 8-bit export would."""
    values = values.astype(np.int64)
    if values.size and (values.min() < 0 or values.max() > 65535):
        raise DatasetError(f"image {path}: {mode} samples span {values.min()}..{values.max()}; expected 8- or 16-bit images")
    return ((values * 255 + 32767) // 65535).astype(np.uint8)


def load_image(path: str | Path, channels: int = 3) -> np.ndarray:
    """One image file -> uint8 HWC, RGB for channels=3, luminance for channels=1."""
    from PIL import Image, UnidentifiedImageError

    if channels not in (1, 3):
        raise DatasetError(f"cannot load {path} with {channels} channels; expected 1 or 3")
    try:
        with warnings.catch_warnings():
            # past Pillow's pixel limit an image is refused, not decoded (a few KB can declare gigapixels)
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(path)
        with image:
            image.load()
            if image.mode in WIDE_GRAY_MODES:  # Pillow's convert would clip every value above 255
                image = Image.fromarray(_eight_bit(np.asarray(image), image.mode, path), "L")
            converted = image.convert("L" if channels == 1 else "RGB")
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as error:
        raise DatasetError(f"image {path}: {error}; refused before decoding. Resize it, or leave it out of the data") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise DatasetError(f"cannot decode image {path} ({type(error).__name__}: {error})") from error
    array = np.asarray(converted, dtype=np.uint8)
    return array[..., np.newaxis] if channels == 1 else array


def load_preprocessed_images(directory_or_file: str | Path, settings: Mapping[str, Any] | Preprocess) -> tuple[np.ndarray, list[Path]]:
    """Image files of any sizes -> one float32 NHWC batch, each resized then preprocessed."""
    files = load_image_files(directory_or_file)
    return preprocess_image_files(files, settings), files


def preprocess_image_files(files: list[Path], settings: Mapping[str, Any] | Preprocess) -> np.ndarray:
    settings = Preprocess.from_config(settings)
    batch = [preprocess(load_image(path, settings.channels)[np.newaxis], settings)[0] for path in files]
    shapes = {image.shape for image in batch}
    if len(shapes) > 1:
        raise DatasetError(f"images {[str(f) for f in files]} have different sizes {sorted(shapes)} and preprocess does not resize them")
    return np.stack(batch)


# --- sklearn digits ---------------------------------------------------------
@dataclass(frozen=True)
class DigitsSplit:
    """The project's held-out split of sklearn digits; images float32 [N,8,8,1] raw 0..16."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


def load_digits_split(holdout_fraction: float, seed: int) -> DigitsSplit:
    """Deterministic stratified split of sklearn's bundled digits (no download)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0.0 < holdout_fraction < 1.0:
        raise DatasetError(f"holdout_fraction is {holdout_fraction}; expected a fraction strictly between 0 and 1")
    digits = load_digits()
    images = digits.images.astype(np.float32)[..., np.newaxis]
    labels = digits.target.astype(np.int64)
    train_images, test_images, train_labels, test_labels = train_test_split(
        images, labels, test_size=holdout_fraction, random_state=seed, stratify=labels
    )
    return DigitsSplit(
        np.ascontiguousarray(train_images), train_labels, np.ascontiguousarray(test_images), test_labels
    )


# --- one entry point for the stages ---------------------------------------------
# the splits each kind of data set has (data.calib_split, data.eval_split): an images directory is one split
SPLITS = {"digits": ("train", "test"), "cifar10": CIFAR10_BATCHES, "images": ("all",), "arrays": ARRAY_SPLITS}

class PreprocessedImages:
    """Model-ready images (float32 NHWC) made one slice at a time: a split is kept raw (uint8 for
    CIFAR, file names for images), and only the batch being fed exists in float32. Reads like an
    array: len, slices, an index, shape, np.asarray (which makes them all)."""

    def __init__(self, count: int, make: Callable[[slice], np.ndarray], source: str, content: str):
        self._count, self._make, self.source = count, make, source
        self.content = content  # SHA-256 of what they are made from: equal for the same images, whatever their path
        self._image_shape: tuple[int, ...] | None = None

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int | slice) -> np.ndarray:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            if step != 1:
                raise IndexError(f"{self.source}: images are read in contiguous batches, not with step {step}")
            return self._make(slice(start, max(start, stop)))
        position = range(self._count)[index]  # IndexError past the end, as an array's
        return self._make(slice(position, position + 1))[0]

    @property
    def image_shape(self) -> tuple[int, ...]:
        if self._image_shape is None:
            self._image_shape = tuple(self[0].shape) if self._count else ()
        return self._image_shape

    @property
    def shape(self) -> tuple[int, ...]:
        return (self._count, *self.image_shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self[:]
        return whole if dtype is None else whole.astype(dtype)

    def batch_bytes(self, batch: int) -> int:
        return batch * elements(self.image_shape) * np.dtype(np.float32).itemsize


@dataclass
class LabeledImages:
    """Model-ready images and their labels (None where the data has none)."""

    images: PreprocessedImages
    labels: np.ndarray | None
    source: str  # for messages: which file or split the images came from


def load_split(
    kind: str,
    path: str | Path | None,
    split: str,
    settings: Mapping[str, Any] | Preprocess,
    limit: int | None = None,
    holdout_fraction: float = 0.2,
    seed: int = 0,
    budget: MemoryBudget | None = None,
) -> LabeledImages:
    """The `split` of a data set (config `data`), preprocessed for the model, first `limit` images."""
    settings = Preprocess.from_config(settings)
    if kind == "digits":
        if split not in ("train", "test"):
            raise DatasetError(f"data split {split!r}: the digits data set has splits 'train' and 'test'")
        digits = load_digits_split(holdout_fraction, seed)
        raw, labels = (digits.train_images, digits.train_labels) if split == "train" else (digits.test_images, digits.test_labels)
        source = f"digits/{split}"
    elif kind == "cifar10":
        raw, labels = load_cifar10(_required(path, kind), split)
        source = str(Path(path) / split)
    elif kind == "arrays":  # the model's input as it is: no preprocessing, any rank
        samples, labels = load_arrays(_required(path, kind), split, limit, budget)
        source = f"{path}:{split}"
        if isinstance(samples, dict):  # a model of several inputs: each batch is {input name: its samples}
            named = samples
            content = content_digest("arrays", [part for name, array in named.items()
                                                for part in (f"{name} {array.dtype.str} {array.shape}".encode(), array.data)])
            count = len(named)
            return LabeledImages(PreprocessedImages(count, lambda part: named[part], source, content), labels, source)
        content = content_digest("arrays", [f"{samples.dtype.str} {samples.shape}".encode(), samples.data])
        return LabeledImages(PreprocessedImages(len(samples), lambda part: samples[part], source, content), labels, source)
    elif kind == "images":
        files = load_image_files(_required(path, kind))[:limit]
        images = PreprocessedImages(len(files), lambda part: preprocess_image_files(files[part], settings), str(path),
                                    content_digest(settings, (Path(file).read_bytes() for file in files)))
        return LabeledImages(_within(images, settings, budget), None, str(path))
    else:
        raise DatasetError(f"data.kind={kind!r}: expected digits, cifar10, images or arrays")
    raw, labels = raw[:limit], labels[:limit]
    if len(raw) == 0:
        raise DatasetError(f"{source}: no images")
    content = content_digest(settings, [f"{raw.dtype.str} {raw.shape}".encode(), np.ascontiguousarray(raw).data])
    return LabeledImages(_within(PreprocessedImages(len(raw), lambda part: preprocess(raw[part], settings), source, content), settings, budget),
                         labels, source)


def content_digest(settings: Preprocess | str, raw_parts: Iterable) -> str:
    """SHA-256 of preprocessed images by what makes them: the preprocessing and the raw bytes (a split's
    array, or each image file's bytes in order)."""
    digest = hashlib.sha256(repr(settings).encode())
    for part in raw_parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def _within(images: PreprocessedImages, settings: Preprocess, budget: MemoryBudget | None) -> PreprocessedImages:
    """One preprocessed image must fit the budget (a batch is then sized to it by the stage);
    checked from the settings, before one is made, where they fix the size."""
    if budget is not None:
        per_image = preprocessed_bytes(settings) or images.batch_bytes(1)
        budget.check(f"one preprocessed image of {images.source}", per_image, lower="model.preprocess.size")
    return images


def preprocessed_bytes(settings: Mapping[str, Any] | Preprocess) -> int | None:
    """The float32 bytes of one image as `settings` make it, when they fix its size."""
    settings = Preprocess.from_config(settings)
    if settings.resize == "none" or not settings.size:
        return None
    return elements((*settings.size, settings.channels)) * np.dtype(np.float32).itemsize



def check_source(kind: str, path: str | Path | None, splits: tuple[str, ...]) -> None:
    """That the data set a run will read is there (its directory and the split files), without reading it."""
    if kind == "cifar10":
        for split in splits:
            _cifar10_file(_required(path, kind), split)
    elif kind == "images":
        load_image_files(_required(path, kind))
    elif kind == "arrays":
        check_arrays(_required(path, kind), splits)


def _required(path: str | Path | None, kind: str) -> Path:
    if not path:
        raise DatasetError(f"data.kind={kind} needs data.path (the directory holding the data)")
    return Path(path)
