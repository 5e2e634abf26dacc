"""Inputs as arrays (data=arrays): an .npz of the model's inputs as they are, any rank, no preprocessing.

The archive is untrusted: it is read with allow_pickle=False, each array's header is read before the
array (names, dtype, shape), and what reading one would allocate is checked against the budget first."""

from __future__ import annotations

import math
import re
import zipfile
from pathlib import Path

import numpy as np

from core.data.errors import DatasetError
from core.limits import MemoryBudget, elements, npy_header

ARRAY_SPLITS = ("calib", "eval")  # the arrays an .npz holds: data.calib_split and data.eval_split name them
ARRAY_EXPECTED = ("an .npz (numpy.savez) holding `calib` and `eval`, float32 [N, *the model's input shape] (or int token ids "
                  "[N, length] of a model whose input is integer; a model of several inputs: `calib/<input name>` and "
                  "`eval/<input name>` for each), and optionally `calib_labels` / `eval_labels`, int [N]")
INT32_MIN, INT32_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max
INPUT_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/]*")  # TensorFlow's op names (tensorflow/core/framework/node_def_util.cc)


class NamedSamples(dict):
    """A batch of a model of several inputs, {input name: its samples}, sliced and counted as an array of the samples is:
    `batch[a:b]` slices every input alike, `len(batch)` counts samples (its keys are still iterated as a dict's)."""

    def __getitem__(self, key):
        if isinstance(key, (slice, int, np.integer)):
            picked = {name: values[key] for name, values in self.items()}
            return NamedSamples(picked) if isinstance(key, slice) else picked
        return super().__getitem__(key)

    def __len__(self) -> int:
        return len(next(iter(self.values()))) if dict.__len__(self) else 0


def array_headers(path: str | Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """name -> (shape, dtype) of every array in an .npz, from the headers alone (nothing allocated)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path} does not exist or is not a file; expected {ARRAY_EXPECTED}")
    try:
        with zipfile.ZipFile(path) as archive:
            headers = {}
            for member in archive.namelist():
                if not member.endswith(".npy"):
                    raise DatasetError(f"{path}: {member} is not an array; expected {ARRAY_EXPECTED}")
                with archive.open(member) as stream:
                    shape, dtype = headers[member[: -len(".npy")]] = npy_header(stream, f"{path}: {member}")
                # an .npy's shape is concrete: a 0 is no values (elements() counts a model's open dimension as 1)
                declared, held = math.prod(shape) * dtype.itemsize, archive.getinfo(member).file_size
                if declared > held:  # checked before any budget: a header over a tiny member is damage, not a big array
                    raise DatasetError(f"{path}: {member} declares {dtype} {list(shape)} ({declared} bytes) but holds {held} "
                                       "bytes: the file is truncated or damaged; write it again (numpy.savez)")
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        if isinstance(error, DatasetError):
            raise
        raise DatasetError(f"{path}: not an .npz archive ({error}); expected {ARRAY_EXPECTED}") from None
    return headers


def split_arrays(headers: dict, split: str) -> dict[str, str]:
    """The arrays of `split` by input name: {"": split} for one input's `split`, or each `split/<input name>` of a model of
    several inputs ({} where the .npz holds neither)."""
    if split in headers:
        return {"": split}
    prefix = f"{split}/"
    return {name[len(prefix):]: name for name in sorted(headers) if name.startswith(prefix) and len(name) > len(prefix)}


def check_arrays(path: str | Path, splits: tuple[str, ...]) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The .npz's headers, every named split in it as float32 (or integer: token ids) of rank 2 or more (one array, or
    one per input of a model of several: `<split>/<input name>`, the same inputs and samples in each), their labels int of
    one per sample, and the splits of one sample shape; a DatasetError naming the file and the array otherwise."""
    headers = array_headers(path)
    groups = {}
    for split in splits:
        groups[split] = split_arrays(headers, split)
        if not groups[split]:
            raise DatasetError(f"{path}: no array {split!r} (it holds {sorted(headers) or 'none'}); expected {ARRAY_EXPECTED}")
        counts = set()
        for input_name, name in groups[split].items():
            if input_name and not INPUT_NAME.fullmatch(input_name) or ".." in input_name.split("/"):
                raise DatasetError(f"{path}: the array {name!r} names the input {input_name!r}, which no model has: an input's name "
                                   "is letters, digits and '_', '.', '-', '/' (a TensorFlow name); name each array `<split>/<the "
                                   "model's input name>`")
            shape, dtype = headers[name]
            if not (dtype == np.float32 or dtype.kind in "iu") or len(shape) < 2 or shape[0] == 0:
                raise DatasetError(f"{path}: {name!r} is {dtype} {list(shape)}; expected float32 [N, ...] (or int token ids) with N >= 1 "
                                   "samples (the model's input as it takes it: no preprocessing is applied to arrays)")
            if 0 in shape[1:]:
                raise DatasetError(f"{path}: {name!r} is {dtype} {list(shape)}: each sample holds no values; expected the model's "
                                   "input shape for each sample")
            counts.add(shape[0])
        if len(counts) > 1:
            raise DatasetError(f"{path}: the inputs of {split!r} ({', '.join(groups[split].values())}) hold {sorted(counts)} samples; "
                               "each input holds one per sample")
        count = counts.pop()
        if f"{split}_labels" in headers:
            label_shape, label_dtype = headers[f"{split}_labels"]
            if label_dtype.kind not in "iu" or label_shape != (count,):
                raise DatasetError(f"{path}: {split}_labels is {label_dtype} {list(label_shape)}; expected int [{count}], "
                                   f"one class per sample of {split!r}")
            _check_labels(path, f"{split}_labels")
    layouts = {tuple((name, headers[array][0][1:]) for name, array in groups[split].items()) for split in splits}
    if len(layouts) > 1:
        shapes = sorted(sorted(list(headers[array][0][1:]) for array in groups[split].values()) for split in splits)
        raise DatasetError(f"{path}: {' and '.join(repr(split) for split in splits)} hold samples of different shapes "
                           f"{[shape[0] if len(shape) == 1 else shape for shape in shapes]}; both must be the model's input shape")
    return headers


def _check_labels(path: str | Path, name: str) -> None:
    """A label is a class index (the position of its score in the model's output): none negative. A top-1 against -1 would
    read as a real 0%."""
    with np.load(path, allow_pickle=False) as archive:
        labels = _read(archive, path, name)
    negative = np.flatnonzero(labels < 0)
    if negative.size:
        raise DatasetError(f"{path}: {name}[{negative[0]}] is {labels[negative[0]]} ({negative.size} of {labels.size} labels are "
                           f"negative); a label is a class index 0, 1, ... (the position of its score in the model's output): "
                           f"fix the labels, or leave {name} out (the run then reports no top-1)")


def load_arrays(path: str | Path, split: str, limit: int | None,
                budget: MemoryBudget | None) -> tuple[np.ndarray | dict[str, np.ndarray], np.ndarray | None]:
    """(the first `limit` samples of `split`: an array, or one per input name of a model of several inputs; their labels
    or None), the split's size checked against the budget before it is read."""
    if split not in ARRAY_SPLITS:
        raise DatasetError(f"data split {split!r}: an arrays data set has the splits {', '.join(ARRAY_SPLITS)}")
    headers = check_arrays(path, (split,))
    arrays = split_arrays(headers, split)
    if budget is not None:
        sizes = [elements(headers[name][0]) * headers[name][1].itemsize for name in arrays.values()]
        budget.check(f"{path}: {', '.join(repr(name) for name in arrays.values())} "
                     f"({', '.join(f'{list(headers[name][0])} {headers[name][1]}' for name in arrays.values())})", sum(sizes),
                     lower="data.path's arrays")
    try:
        with np.load(path, allow_pickle=False) as archive:
            samples = {input_name: _checked(path, name, np.ascontiguousarray(_read(archive, path, name)[:limit]))
                       for input_name, name in arrays.items()}
            labels = _read(archive, path, f"{split}_labels")[:limit].astype(np.int64) if f"{split}_labels" in headers else None
    except (zipfile.BadZipFile, OSError) as error:
        raise DatasetError(f"{path}: unreadable ({error}); write it again (numpy.savez)") from None
    return (samples[""] if "" in samples else NamedSamples(samples)), labels


def _read(archive, path: str | Path, name: str) -> np.ndarray:
    """One array of the archive; a DatasetError naming the file and the array where its data is damaged."""
    try:
        return archive[name]
    except (ValueError, EOFError, OSError, zipfile.BadZipFile) as error:
        raise DatasetError(f"{path}: the array {name!r} is damaged ({error}); write the file again (numpy.savez)") from None


def _checked(path: str | Path, name: str, samples: np.ndarray) -> np.ndarray:
    if samples.dtype.kind in "iu":  # token ids: int32, as an integer input takes them
        if samples.size and (samples.min() < INT32_MIN or samples.max() > INT32_MAX):
            raise DatasetError(f"{path}: {name!r} holds integers outside int32; token ids are int32")
        return samples.astype(np.int32)
    if not np.all(np.isfinite(samples)):
        raise DatasetError(f"{path}: {name!r} holds NaN or Inf values; every sample must be finite")
    return samples
