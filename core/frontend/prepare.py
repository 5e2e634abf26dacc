"""A model's graph made ready for the IR's patterns: constants evaluated, per-channel affine maps after
no conv given a depthwise 1x1 conv to fold into (channel_affine.py), BatchNorm folded into the convs
(folding.py), TensorFlow/Keras idioms rewritten into canonical forms
(canonicalize.py). fold_check runs it and verifies the result on data; import runs it too, to
refuse what no IR layer can express before any later stage runs."""

from __future__ import annotations

from dataclasses import dataclass

from core.frontend.canonicalize import EARLY_REWRITES, canonicalize
from core.frontend.channel_affine import insert_channel_affine_convs
from core.frontend.constant_folding import constant_node_names, fold_constants
from core.frontend.folding import FoldResult, fold_batch_norms
from core.frontend.graph import Graph
from core.frontend.signals import SIGNAL_INPUT, held_signal


@dataclass
class Prepared:
    constant_folded: Graph  # the graph with its constant subgraphs evaluated
    folding: FoldResult  # BatchNorms folded, and what was left unfolded (and why)
    graph: Graph  # the folded, canonical graph
    rewrites: list[str]  # a line per canonical rewrite


def prepare(graph: Graph) -> Prepared:
    constant_folded = fold_constants(graph)
    early, early_rewrites = canonicalize(constant_folded, EARLY_REWRITES)
    if constant_node_names(early):  # computed on constants a rewrite made (a recurrent layer's zero state plus its bias)
        early = fold_constants(early)
    with_convs, _ = insert_channel_affine_convs(early)
    folding = fold_batch_norms(with_convs)
    canonical, rewrites = canonicalize(folding.graph)
    canonical.infer_shapes()
    signal = held_signal(graph, canonical)
    if signal is not None:  # the .tflite writer gives the file the model's own [1, L, C] input
        canonical.source[SIGNAL_INPUT] = signal
    return Prepared(constant_folded, folding, canonical, early_rewrites + rewrites)
