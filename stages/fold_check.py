"""fold-check: BatchNorm folded into conv weights (IR spec, section 3), or a
refusal that lists every BatchNorm left, and TensorFlow/Keras idioms rewritten into canonical
forms (core/frontend/prepare.py); the result is verified against the original on a sample
input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from core.frontend.fake_quant import bypass_fake_quant
from core.frontend.folding import find_batch_norms, max_abs_difference
from core.frontend.embedding import is_ids_input, vocabulary_of
from core.frontend.graph import Graph, tensor_node
from core.frontend.prepare import prepare
from core.limits import MemoryBudget, check_activations
from core.reports.warnings import summarize


class FoldError(ValueError):
    pass


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    settings = params.fold_check
    original = Graph.load(inputs["import"])
    prepared = prepare(original)
    if settings.strict:
        _refuse_if_any(find_batch_norms(prepared.constant_folded), "fold_check.strict=true and the graph has unfolded BatchNorm")
    result = prepared.folding
    _refuse_if_any(result.unfolded, "these BatchNorms cannot be folded into a conv")
    folded = prepared.graph

    budget = MemoryBudget(params.limits.memory_mb)
    # the original and the folded graph run the sample side by side
    per_image = 2 * check_activations(budget, original.activation_bytes(), "fold_check")
    batch = budget.batch_size(settings.sample_batch, per_image, "the fold check")
    requantizing = any("requantized_weights" in entry for entry in result.folded)
    difference, fake_quantized = _differences(original, folded, sample_input(original, batch, settings.seed), requantizing)
    relative = difference["max_abs_difference"] / max(1.0, difference["max_abs_reference"])
    if relative > settings.tolerance:
        raise FoldError(
            f"the folded graph differs from the original by {difference['max_abs_difference']:.3g} "
            f"({relative:.3g} relative to the largest end point value, tolerance fold_check.tolerance={settings.tolerance}); "
            f"per end point: {difference['per_end_point']}"
        )
    folded.save(out_dir)
    report = {
        "folded_batch_norms": result.folded,
        "bias_adds": result.bias_adds,
        "canonical_rewrites": prepared.rewrites,
        "nodes_before": len(original.nodes),
        "nodes_after": len(folded.nodes),
        "op_counts_after": folded.op_counts(),
        "max_abs_difference": difference,
        **({"max_abs_difference_fake_quantized": fake_quantized} if requantizing else {}),
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    requantized = [(f"BatchNorm {entry['batch_norm']} (after {entry['requantized_weights']})",
                    "follows fake-quantized weights: folded into them, so the folded weights no longer lie on the QAT grid; "
                    "calibrate re-quantizes them (see its qat_range_changes)") for entry in result.folded if "requantized_weights" in entry]
    for line in summarize(requantized, noun="BatchNorms"):
        ctx.log(f"warning: {line}")
    ctx.log(f"folded {len(result.folded)} BatchNorm(s), {len(prepared.rewrites)} canonical rewrite(s); {len(original.nodes)} -> {len(folded.nodes)} nodes; max |diff| {difference['max_abs_difference']:.3g}")
    if requantizing:
        ctx.log(f"with the activations' FakeQuants in place the folded graph differs by up to {fake_quantized['max_abs_difference']:.3g} "
                f"(the fold's float rounding moving values across their rounding boundaries; calibrate re-quantizes the weights)")
    return {
        **({"max_abs_diff_fake_quantized": fake_quantized["max_abs_difference"]} if requantizing else {}),
        "batch_norms_folded": len(result.folded),
        "conv_bias_adds": len(result.bias_adds),
        "nodes": len(folded.nodes),
        "max_abs_diff": difference["max_abs_difference"],
        "max_rel_diff": relative,
    }


def _differences(original: Graph, folded: Graph, sample: np.ndarray, requantizing: bool) -> tuple[dict, dict | None]:
    """(the difference the tolerance applies to, the fake-quantized graphs' when it is another). With BatchNorm after
    fake-quantized weights (tfmot's layout) the fold keeps the float function of the trained quantized weights:
    compared with the activations' FakeQuants bypassed in both graphs; with them in place a value at a rounding
    boundary moves by whole steps, which is measured and reported, not a failure."""
    if not requantizing:
        return max_abs_difference(original, folded, sample), None
    fake_quantized = max_abs_difference(original, folded, sample)
    return max_abs_difference(*(bypass_fake_quant(graph, activations_only=True)[0] for graph in (original, folded)), sample), fake_quantized


def sample_input(graph: Graph, batch: int, seed: int) -> np.ndarray | dict[str, np.ndarray]:
    """Uniform in [-1, 1], the range every supported model's input is normalized to; token ids uniform over the
    vocabulary. A model of several inputs: {input name: its samples}."""
    rng = np.random.default_rng(seed)
    samples = {tensor_node(tensor): _sample(graph, tensor, batch, rng) for tensor in graph.input_tensors}
    return next(iter(samples.values())) if len(samples) == 1 else samples


def _sample(graph: Graph, tensor: str, batch: int, rng: np.random.Generator) -> np.ndarray:
    shape = graph.shape(tensor)
    if shape is None or any(dim < 0 for dim in shape[1:]):
        raise FoldError(f"input {tensor} has no static shape {shape}; set the Placeholder's shape in the model")
    batch = shape[0] if shape[0] > 0 else batch  # some graphs fix the batch (the SSD graph: 1)
    if is_ids_input(graph.node(tensor_node(tensor))):
        return rng.integers(0, vocabulary_of(graph, tensor) or 1, size=(batch, *shape[1:])).astype(np.int32)
    return rng.uniform(-1.0, 1.0, size=(batch, *shape[1:])).astype(np.float32)


def _refuse_if_any(batch_norms: list[dict], why: str) -> None:
    if batch_norms:
        lines = "\n".join(f"  - {bn['name']} ({bn['op']}): {bn.get('reason', 'after ' + str(bn.get('conv')))}" for bn in batch_norms)
        raise FoldError(
            f"{why} ({len(batch_norms)}):\n{lines}\n"
            "Fold BatchNorm into the conv weights before export, or run with fold_check.strict=false to let this stage fold it."
        )
