"""How much simulated quantization costs: the float graph against its annotated twin.

Both graphs run in TensorFlow on the same batches; `compare` accumulates sums
(never the activations themselves), so memory stays constant however many
images are evaluated. Reported:

- top-1 of each graph on a classifier (one end point, flattened to [N, classes]);
- per end point: SQNR in dB and cosine similarity over all its values;
- per quantized layer output: SQNR between the float tensor and the FakeQuant
  output that replaces it in the annotated graph.

SQNR = 10 log10(sum f^2 / sum (f - q)^2). Identical tensors have no noise and
an infinite SQNR; it is reported as SQNR_CAP_DB (200 dB, beyond anything int8
reaches: ~6 dB per bit) so results stay finite numbers in JSON and plots.

The sums are one compiled pass over each pair (`_error_sums`, float64 accumulators): four
numpy dot products over float64 copies were a third of annotate's time.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numba
import numpy as np

from core.frontend.graph import Graph, GraphError
from core.frontend.tf_runtime import DEFAULT_BATCH_SIZE, GraphRunner

SQNR_CAP_DB = 200.0


# --- streaming statistics -------------------------------------------------------
@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _error_sums(reference, quantized):  # pragma: no cover  (compiled; tested through ErrorSums)
    """sum f^2, sum q^2, sum f*q, sum (f-q)^2 in float64 (reassociated: vector partial sums)."""
    signal = squares = cross = noise = 0.0
    for index in range(reference.size):
        f, q = np.float64(reference[index]), np.float64(quantized[index])
        signal += f * f
        squares += q * q
        cross += f * q
        noise += (f - q) * (f - q)
    return signal, squares, cross, noise


@dataclass
class ErrorSums:
    """sum f^2, sum q^2, sum f*q, sum (f-q)^2 over everything seen, in float64."""

    signal: float = 0.0
    quantized: float = 0.0
    cross: float = 0.0
    noise: float = 0.0

    def add(self, reference: np.ndarray, quantized: np.ndarray) -> None:
        if reference.shape != quantized.shape:
            raise GraphError(f"cannot compare tensors of shapes {list(reference.shape)} and {list(quantized.shape)}")
        signal, squares, cross, noise = _error_sums(np.ascontiguousarray(reference).ravel(), np.ascontiguousarray(quantized).ravel())
        self.signal += signal
        self.quantized += squares
        self.cross += cross
        self.noise += noise

    def sqnr_db(self) -> float:
        return sqnr_from_sums(self.signal, self.noise)

    def cosine(self) -> float:
        if self.signal == 0.0 and self.quantized == 0.0:
            return 1.0  # both all-zero: the same tensor
        if self.signal == 0.0 or self.quantized == 0.0:
            return 0.0
        return self.cross / float(np.sqrt(self.signal) * np.sqrt(self.quantized))


@numba.njit(cache=True, nogil=True)
def grid_agreement(values, scale, integers):  # pragma: no cover  (compiled; tested in tests/test_evaluation.py)
    """(elements equal, largest |difference|) of rint(values * scale) (half to even) against `integers`,
    both flat. `scale` a power of two of `values`' dtype: the product is exact, as it is in float64."""
    equal, largest = 0, 0.0
    for index in range(values.size):
        difference = abs(np.rint(values[index] * scale) - integers[index])
        equal += difference == 0
        largest = max(largest, difference)
    return equal, largest


def sqnr_from_sums(signal: float, noise: float) -> float:
    """10 log10(signal / noise), clamped to +-SQNR_CAP_DB (no noise: +cap; no signal: -cap)."""
    if noise == 0.0:
        return SQNR_CAP_DB
    if signal == 0.0:
        return -SQNR_CAP_DB
    return float(np.clip(10.0 * np.log10(signal / noise), -SQNR_CAP_DB, SQNR_CAP_DB))


def sqnr_db(reference: np.ndarray, quantized: np.ndarray) -> float:
    """SQNR of one pair of arrays (see the module docstring for the cap)."""
    sums = ErrorSums()
    sums.add(np.asarray(reference), np.asarray(quantized))
    return sums.sqnr_db()


# --- comparison -----------------------------------------------------------------
@dataclass
class EndPointComparison:
    float_tensor: str
    annotated_tensor: str
    sqnr_db: float
    cosine: float


@dataclass
class Comparison:
    num_images: int
    end_points: list[EndPointComparison]
    per_layer_sqnr_db: dict[str, float]  # in the order of `layer_tensors` (execution order)
    top1_float: float | None = None  # fractions in [0, 1]; None without labels
    top1_annotated: float | None = None
    top1_agreement: float | None = None  # share of images where both graphs predict the same class
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "num_images": self.num_images,
            "top1_float": self.top1_float,
            "top1_annotated": self.top1_annotated,
            "top1_agreement": self.top1_agreement,
            "end_points": [vars(item) for item in self.end_points],
            "per_layer_sqnr_db": dict(self.per_layer_sqnr_db),
            "notes": list(self.notes),
        }


def class_labels(graph: Graph, labels: np.ndarray | None, num_classes: int | None) -> tuple[np.ndarray | None, str | None]:
    """`labels` if the graph's first end point scores classes (num_classes values an image, or
    more than the largest label), else None and why: a top-1 of a box regressor's output would
    read as a real 0.0. A model of several outputs (class scores and a box regression) is scored
    on its first; every end point is compared by SQNR."""
    if labels is None:
        return None, None
    if len(labels) and int(labels.min()) < 0:  # a top-1 against them would read as a real 0%
        raise GraphError(f"the evaluation labels hold {int(labels.min())}: a label is a class index 0, 1, ... (the position of its "
                         "score in the model's output)")
    if num_classes is not None and len(labels) and int(labels.max()) >= num_classes:
        raise GraphError(f"model.num_classes={num_classes}, but the evaluation labels go up to {int(labels.max())}: set "
                         f"model.num_classes to the data set's number of classes ({int(labels.max()) + 1} or more)")
    shape = graph.shape(graph.end_points[0]) or []
    size = int(np.prod([d for d in shape[1:] if d and d > 0])) if len(shape) > 1 else 0
    wanted = num_classes if num_classes is not None else int(labels.max()) + 1
    if size != wanted and not (num_classes is None and size >= wanted):
        return None, (f"no top-1: the end point {graph.end_points[0]} holds {size} values an image, "
                      f"not {wanted} class scores (model.num_classes)"
                      + (f"; top-1 scores the first of the {len(graph.end_points)} end points: list the class scores first in "
                         "model.end_points" if len(graph.end_points) > 1 else ""))
    return labels, None


def _top1(logits: np.ndarray) -> np.ndarray:
    return logits.reshape(len(logits), -1).argmax(axis=1)


def compare(
    float_graph: Graph,
    annotated_graph: Graph,
    layer_tensors: dict[str, tuple[str, str]],
    images: np.ndarray,
    labels: np.ndarray | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    reference: Graph | None = None,
    record: Callable[[list[np.ndarray], list[np.ndarray]], None] | None = None,
) -> Comparison:
    """Run both graphs on `images` and measure what quantization changed.

    End points are paired by position. With `labels`, the graphs are treated as
    classifiers: the argmax of the first end point is the class.
    `reference`: the model the end points and top-1 are measured against when `float_graph`
    (whose layers the annotated graph quantizes, and which the per-layer figures compare
    with) is a rewrite of it (cross-layer equalized). `record(reference, annotated end points)` sees each batch's."""
    reference = reference or float_graph
    _check_comparable(reference, annotated_graph, images, labels)
    names = list(layer_tensors)
    ends = len(reference.end_points)
    layer_fetches = [layer_tensors[name][0] for name in names]
    float_fetches = list(reference.end_points) + (layer_fetches if reference is float_graph else [])
    annotated_fetches = list(annotated_graph.end_points) + [layer_tensors[name][1] for name in names]
    end_sums = [ErrorSums() for _ in range(ends)]
    layer_sums = {name: ErrorSums() for name in names}
    correct_float = correct_annotated = agree = 0
    start = 0
    with contextlib.ExitStack() as stack:
        float_runner = stack.enter_context(GraphRunner(reference))
        annotated_runner = stack.enter_context(GraphRunner(annotated_graph))
        runs = [float_runner.batches(float_fetches, images, batch_size), annotated_runner.batches(annotated_fetches, images, batch_size)]
        if reference is not float_graph and layer_fetches:
            runs.append(stack.enter_context(GraphRunner(float_graph)).batches(layer_fetches, images, batch_size))
        for values in zip(*runs):
            float_values = values[0] + (values[2] if len(values) > 2 else [])
            annotated_values = values[1]
            for sums, f, q in zip(end_sums + list(layer_sums.values()), float_values, annotated_values):
                sums.add(f, q)
            if record is not None:
                record(float_values[:ends], annotated_values[:ends])
            if labels is not None:
                predicted_f, predicted_q = _top1(float_values[0]), _top1(annotated_values[0])
                batch_labels = labels[start : start + len(predicted_f)]
                correct_float += int(np.sum(predicted_f == batch_labels))
                correct_annotated += int(np.sum(predicted_q == batch_labels))
                agree += int(np.sum(predicted_f == predicted_q))
            start += len(float_values[0])
    comparison = Comparison(
        num_images=start,
        end_points=[
            EndPointComparison(f, q, sums.sqnr_db(), sums.cosine())
            for f, q, sums in zip(reference.end_points, annotated_graph.end_points, end_sums)
        ],
        per_layer_sqnr_db={name: sums.sqnr_db() for name, sums in layer_sums.items()},
    )
    if labels is not None and start:
        comparison.top1_float, comparison.top1_annotated, comparison.top1_agreement = (
            correct_float / start, correct_annotated / start, agree / start)
    return comparison


END_POINTS_DIR = "end_points"
END_POINTS_INDEX = "index.json"


class EndPointRecorder:
    """Both graphs' end points on every evaluation image, batch by batch, while they take at most
    `limit_bytes`: what annotate measured, kept in its artifact so that simulate, on the same images,
    does not run the two graphs again (a detector's end points on many images are not kept)."""

    def __init__(self, limit_bytes: int):
        self.limit_bytes, self.bytes, self.overflowed = limit_bytes, 0, False
        self.batches: list[tuple[list[np.ndarray], list[np.ndarray]]] = []

    def __call__(self, reference_ends: list[np.ndarray], annotated_ends: list[np.ndarray]) -> None:
        self.bytes += sum(value.nbytes for value in (*reference_ends, *annotated_ends))
        if self.bytes > self.limit_bytes:
            self.overflowed = True
            self.batches.clear()  # all or nothing: simulate reads the end points of every image, or runs the graphs
        elif not self.overflowed:
            self.batches.append((list(reference_ends), list(annotated_ends)))

    def save(self, directory: Path, images_content: str) -> bool:
        """`<directory>/end_points/`: reference_<i>.npy and annotated_<i>.npy per end point and index.json (with
        the images' count and `images_content`, their digest); False (nothing written) when they went over the limit."""
        if self.overflowed or not self.batches:
            return False
        target = directory / END_POINTS_DIR
        target.mkdir()
        for graph_index, graph in enumerate(("reference", "annotated")):
            for position in range(len(self.batches[0][graph_index])):
                np.save(target / f"{graph}_{position}.npy", np.concatenate([batch[graph_index][position] for batch in self.batches]))
        images = sum(len(batch[0][0]) for batch in self.batches)
        (target / END_POINTS_INDEX).write_text(json.dumps({"images": images, "images_content": images_content,
                                                           "end_points": len(self.batches[0][0])}) + "\n")
        return True


@dataclass
class KeptEndPoints:
    """What an EndPointRecorder saved, memory-mapped (read batch by batch, never all at once)."""

    reference: list[np.ndarray]
    annotated: list[np.ndarray]

    @classmethod
    def load(cls, directory: Path, images: int, images_content: str, end_points: int) -> "KeptEndPoints | None":
        """The end points kept under `directory` when they are those of these `images` images (`images_content`: their
        digest) with `end_points` end points each; else None (not kept: the graphs run again)."""
        index_path = directory / END_POINTS_DIR / END_POINTS_INDEX
        if not index_path.is_file():
            return None
        index = _read_index(index_path)
        if (index.get("images"), index.get("images_content"), index.get("end_points")) != (images, images_content, end_points):
            return None
        arrays = {graph: [_read_end_point(directory / END_POINTS_DIR / f"{graph}_{position}.npy", images)
                          for position in range(end_points)] for graph in ("reference", "annotated")}
        return cls(arrays["reference"], arrays["annotated"])

    def batch(self, start: int, count: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Images start..start + count of each end point: (reference, annotated), in memory."""
        return ([np.array(value[start : start + count]) for value in self.reference],
                [np.array(value[start : start + count]) for value in self.annotated])


class KeptEndPointsError(ValueError):
    """annotate's end_points/ is damaged: a file that is not what annotate writes."""


def _damaged(path: Path, what: str) -> KeptEndPointsError:
    return KeptEndPointsError(f"{path}: {what}, not the end points annotate keeps; run annotate again (delete its "
                              f"{END_POINTS_DIR}/ for simulate to run both graphs)")


def _read_index(path: Path) -> dict:
    try:
        index = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _damaged(path, f"not JSON ({error})") from None
    if not isinstance(index, dict):
        raise _damaged(path, f"a JSON {type(index).__name__}, an object expected")
    return index


def _read_end_point(path: Path, images: int) -> np.ndarray:
    """One kept end point, memory-mapped: a numeric .npy of `images` rows."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as error:
        raise _damaged(path, f"unreadable as .npy ({error})") from None
    if array.ndim < 1 or len(array) != images or array.dtype.kind not in "fiu":
        raise _damaged(path, f"{array.dtype} {list(array.shape)}, {images} images of numbers expected")
    return array


def _check_comparable(reference: Graph, annotated_graph: Graph, images: np.ndarray, labels: np.ndarray | None) -> None:
    if len(reference.end_points) != len(annotated_graph.end_points):
        raise GraphError(f"the float graph has {len(reference.end_points)} end points, the annotated one {len(annotated_graph.end_points)}")
    if labels is not None and len(labels) != len(images):
        raise GraphError(f"top-1 needs one label per image; got {len(labels)} labels for {len(images)} images")


def layer_tensor_pairs(layer_graph, annotated_graph: Graph) -> dict[str, tuple[str, str]]:
    """Layer (its IR name, as every per-layer report names it) -> (its float output, the FakeQuant output replacing it), in execution
    order, for every layer output that `annotate_graph` quantized."""
    quantized = annotated_graph.source.get("annotation", {}).get("activations", {})
    return {layer.ir_name: (layer.output, quantized[layer.output]) for layer in layer_graph.layers if layer.output in quantized}


def top1(graph: Graph, images: np.ndarray, labels: np.ndarray, batch_size: int = DEFAULT_BATCH_SIZE) -> float:
    """Top-1 of a classifier graph (its first end point's argmax) on `images`."""
    correct = 0
    with GraphRunner(graph) as runner:
        for (logits,), start in zip(runner.batches(graph.end_points[:1], images, batch_size), range(0, len(images), batch_size)):
            correct += int(np.sum(_top1(logits) == labels[start : start + len(logits)]))
    return correct / len(images)


def end_point_difference(reference: Graph, candidate: Graph, images: np.ndarray, batch_size: int = DEFAULT_BATCH_SIZE) -> dict:
    """How far a rewritten float graph (cross-layer equalized) is from the one it replaces, on
    `images`: max |difference| over all end points, the largest |value| for scale, and the
    lowest end-point SQNR."""
    sums = [ErrorSums() for _ in reference.end_points]
    largest_difference = largest_value = 0.0
    with GraphRunner(reference) as reference_runner, GraphRunner(candidate) as candidate_runner:
        batches = zip(reference_runner.batches(reference.end_points, images, batch_size),
                      candidate_runner.batches(candidate.end_points, images, batch_size))
        for expected, got in batches:
            for end_sums, f, q in zip(sums, expected, got):
                end_sums.add(f, q)
                largest_difference = max(largest_difference, float(np.max(np.abs(f.astype(np.float64) - q), initial=0.0)))
                largest_value = max(largest_value, float(np.max(np.abs(f), initial=0.0)))
    return {"max_abs_difference": largest_difference, "max_abs_reference": largest_value,
            "sqnr_db_min": min((end_sums.sqnr_db() for end_sums in sums), default=SQNR_CAP_DB)}
