"""The evaluation images as the stages that evaluate (and calibrate, checking a text model's ids) read them, one call."""

from __future__ import annotations

from core.data.datasets import load_split
from core.limits import MemoryBudget
from pipeline.params import to_plain


def evaluation_split(params, budget: MemoryBudget | None = None, limit: int | None = None):
    """data.eval_split preprocessed as the model's input, held out and seeded as the data config says: its first
    data.eval_num_images, or `limit`."""
    data = params.data
    return load_split(data.kind.value, data.path, data.eval_split, to_plain(params.model.preprocess),
                      limit=data.eval_num_images if limit is None else limit, holdout_fraction=data.holdout_fraction,
                      seed=data.split_seed, budget=budget)
