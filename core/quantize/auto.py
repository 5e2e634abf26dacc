"""calib.method=auto: the calibration table chosen per tensor by what it does to the end points,
as Intel Neural Compressor's accuracy-aware tuning chooses per op.

1. Every method in `methods` makes a whole table (equalization and bias correction as configured);
   the one whose annotated graph has the best end-point SQNR on the search images is the start.
2. Each tensor's candidates are the entries the target's scheme makes of each method's choice
   (QuantScheme.activation_candidates / weight_candidates), one per grid: on a power-of-two
   scheme each method's threshold under each pow2_rounding (ceil, nearest, mse; a method that picks
   its own power of two, mse, gives that one); on tflite_int8 each method's affine range; weights,
   each weight method's (minmax: nothing saturates; mse: least weight error).
3. Greedy by sensitivity: layers in the order of `sensitivity.ranked` (the layer whose
   quantization alone costs most first), each of its tensors tried at each candidate with every
   other choice fixed; a candidate is kept when it raises the end-point SQNR. Biases follow their
   layer's input and weight scales (and their correction) after every move.
4. A candidate the target cannot take (`feasible` says why: a shift out of range) is skipped;
   the search stops at `budget_s` seconds, keeping the best table so far.
5. A candidate that clips more than `max_clipped_fraction` of a tensor's calibration values is not
   tried, unless its method weighs clipping against rounding (mse): a gain it shows on the search
   images is a gain on those images only (KL's threshold on values far from zero, a LayerNorm's
   inverse, lies below all of them), and the quality guard refuses such a table. A whole table with
   such an entry is the start only when every method's has one.

The table's method is "auto"; each entry's `method` names the candidate that won ("kl/ceil",
"mse", "absmax"). What is measured: the annotated graph with integer models (the IR's integers),
against the float graph, on the search images only; held-out figures are annotate's and simulate's.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from core.frontend.graph import Graph
from core.frontend.layers import LayerGraph
from core.frontend.tf_runtime import GraphRunner
from core.quantize.annotate import annotate_graph
from core.quantize.calibration.build import TargetSpec, output_channels, scheme_output_entries
from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import CalibrationSettings, clipping_is_deliberate
from core.quantize.evaluation import ErrorSums
from core.quantize.sensitivity import analyze, ranked
from core.quantize.table import CalibrationTable, TensorEntry

AUTO = "auto"  # the calib.method that is this search, not a threshold method
# a move is kept when it raises the end-point SQNR by more than this (dB): float noise in the
# measurement must not walk the table
MIN_GAIN_DB = 1e-3


@dataclass
class SearchSetup:
    """What the search needs besides the tables: it builds a whole table per method (`make_table`,
    bias correction included), re-derives the biases after a move (`refresh_biases`), says why
    a table cannot be emitted or None (`feasible`)."""

    layer_graph: LayerGraph
    target: TargetSpec
    settings: CalibrationSettings
    stats: dict[str, TensorStatistics]
    make_table: Callable[[str], CalibrationTable]
    refresh_biases: Callable[[CalibrationTable], None]
    feasible: Callable[[CalibrationTable], str | None]
    max_clipped_fraction: float = 0.01  # calib.auto.max_clipped_fraction


@dataclass
class SearchResult:
    table: CalibrationTable
    start_method: str
    method_sqnr_db: dict[str, float]  # each method's whole table (None: the target cannot take it)
    sqnr_db: float  # the chosen table's end-point SQNR on the search images
    evaluations: int
    moves: list[dict] = field(default_factory=list)  # each kept move: tensor, from, to, SQNR after
    stopped_early: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict:
        winners: dict[str, int] = {}
        for entry in self.table.tensors.values():
            if entry.kind in ("activation", "weight"):
                winners[entry.method] = winners.get(entry.method, 0) + 1
        return {"start_method": self.start_method, "method_sqnr_db": self.method_sqnr_db, "sqnr_db": self.sqnr_db,
                "evaluations": self.evaluations, "moves": self.moves, "stopped_early": self.stopped_early,
                "seconds": self.seconds, "winners": winners}


class _Scorer:
    """End-point SQNR of a table's annotated graph against the float graph's end points."""

    def __init__(self, layer_graph: LayerGraph, reference: Graph, images: np.ndarray, batch_size: int):
        self.layer_graph, self.images, self.batch_size = layer_graph, images, batch_size
        with GraphRunner(reference) as runner:
            self.expected = runner.run(reference.end_points, images, batch_size)
        self.evaluations = 0

    def __call__(self, table: CalibrationTable) -> float:
        self.evaluations += 1
        annotated = annotate_graph(self.layer_graph, table)
        with GraphRunner(annotated) as runner:
            got = runner.run(annotated.end_points, self.images, self.batch_size)
        sums = [ErrorSums() for _ in self.expected]
        for end_sums, reference, value in zip(sums, self.expected, got):
            end_sums.add(reference, value.reshape(reference.shape))
        return min(end_sums.sqnr_db() for end_sums in sums)


def search(setup: SearchSetup, methods: list[str], images: np.ndarray, batch_size: int, budget_s: float,
           progress: Callable[[int, int], None] = lambda done, total: None) -> SearchResult:
    started = time.perf_counter()
    score = _Scorer(setup.layer_graph, setup.layer_graph.graph, images, batch_size)
    method_sqnr, best_table, best, start = {}, None, (False, -np.inf), methods[0]
    for name in methods:
        table = setup.make_table(name)
        method_sqnr[name] = None if setup.feasible(table) else score(table)
        # a table that clips no tensor beyond the limit before any that does, then by SQNR
        rank = (not any(clips_too_much(entry, setup.max_clipped_fraction) for entry in table.tensors.values()), method_sqnr[name])
        if method_sqnr[name] is not None and rank > best:
            best_table, best, start = table, rank, name
    if best_table is None:
        raise ValueError(f"calib.method=auto: no method's table fits the target ({setup.feasible(setup.make_table(methods[0]))})")
    best_table = CalibrationTable(AUTO, best_table.target, best_table.bits, dict(best_table.tensors), best_table.float_layers)
    result = SearchResult(best_table, start, method_sqnr, best[1], 0)
    trials = _trials(setup, best_table, methods, images, batch_size)
    for done, (tensor, candidate) in enumerate(trials):
        if time.perf_counter() - started > budget_s:
            result.stopped_early = True
            break
        progress(done + 1, len(trials))
        current = result.table.tensors[tensor]
        if _grid(current) == _grid(candidate):
            continue
        trial = _moved(setup, result.table, tensor, candidate)
        if setup.feasible(trial):
            continue
        sqnr = score(trial)
        if sqnr > result.sqnr_db + MIN_GAIN_DB:
            result.moves.append({"tensor": tensor, "from": [current.method, _quantization(current)],
                                 "to": [candidate.method, _quantization(candidate)], "sqnr_db": sqnr})
            result.table, result.sqnr_db = trial, sqnr
    result.evaluations, result.seconds = score.evaluations, time.perf_counter() - started
    return result


def clips_too_much(entry: TensorEntry, limit: float) -> bool:
    """Whether an activation's entry clips more than `limit` of its calibration values where its method did not weigh
    that clipping against rounding (the quality guard's test, pipeline/quality.py)."""
    return entry.kind == "activation" and (entry.clipped_fraction or 0.0) > limit and not clipping_is_deliberate(entry.method)


def searched_candidates(entries: list[TensorEntry], max_clipped_fraction: float) -> list[TensorEntry]:
    """The candidates the search tries: one per grid (distinct_candidates), none that clips too much (clips_too_much)."""
    return [entry for entry in distinct_candidates(entries) if not clips_too_much(entry, max_clipped_fraction)]


def distinct_candidates(entries: list[TensorEntry]) -> list[TensorEntry]:
    """One entry per quantization grid, the first that gives it (its method names it), in grid order."""
    by_grid: dict[tuple, TensorEntry] = {}
    for entry in entries:
        by_grid.setdefault(_grid(entry), entry)
    return [by_grid[grid] for grid in sorted(by_grid)]


def _grid(entry: TensorEntry) -> tuple:
    """What the integers mean: the range (a power of two's, or an affine scale and zero point's), per channel where
    the entry has channels."""
    return tuple(entry.range), tuple(tuple(channel) for channel in entry.channel_ranges or ())


def _quantization(entry: TensorEntry):
    """How a move names a grid in the report: the log2scale, or (scale, zero point)."""
    return entry.grid.named()


def _trials(setup: SearchSetup, start: CalibrationTable, methods: list[str], images, batch_size: int) -> list[tuple[str, TensorEntry]]:
    """(tensor, candidate entry) in the order of the layers' sensitivity, each layer's output first."""
    order = ranked(analyze(setup.layer_graph, start, setup.layer_graph.graph, images, batch_size))
    weighted = {f"{layer.weight}:0": layer for layer in setup.layer_graph.layers if layer.weight}
    scheme, trials = setup.target.scheme, []
    decided = scheme_output_entries(setup.layer_graph, scheme, start.tensors, setup.stats)  # the kernels', not a method's
    for sensitivity in order:
        for tensor in sensitivity.tensors:
            entry = start.tensors[tensor]
            if tensor in decided:
                continue
            if entry.kind == "activation" and tensor in setup.stats:
                candidates = scheme.activation_candidates(tensor, setup.stats[tensor], methods, setup.settings)
            elif entry.kind == "weight" and tensor in weighted:
                layer = weighted[tensor]
                weight = setup.layer_graph.graph.constants[layer.weight]
                candidates = scheme.weight_candidates(layer.name, weight, lambda weight=weight, layer=layer: output_channels(weight, layer))
            else:
                continue
            trials += [(tensor, candidate) for candidate in searched_candidates(candidates, setup.max_clipped_fraction)]
    return trials


def _moved(setup: SearchSetup, table: CalibrationTable, tensor: str, candidate: TensorEntry) -> CalibrationTable:
    entry = table.tensors[tensor]
    moved = dataclasses.replace(candidate, kind=entry.kind, layer=entry.layer, absmax=entry.absmax, warnings=list(entry.warnings))
    trial = dataclasses.replace(table, tensors={**table.tensors, tensor: moved})
    trial.tensors.update(scheme_output_entries(setup.layer_graph, setup.target.scheme, trial.tensors, setup.stats))  # they follow
    setup.refresh_biases(trial)
    return trial
