"""What a stage reads of its config besides plain values: the choices (Enums) of the schema,
`to_plain`, and `StoredPart`, how a stage names a part of its work for the store. Kept apart from
pipeline/config.py (the schema and its checks) so that a stage's import closure, and so its code
version, does not take in every backend the schema names."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf


class ModelFormat(Enum):
    builtin = "builtin"
    frozen_graph = "frozen_graph"
    saved_model = "saved_model"
    keras = "keras"
    tflite = "tflite"


class Task(Enum):
    classification = "classification"
    detection = "detection"


class Resize(Enum):
    none = "none"
    tf_bilinear = "tf_bilinear"
    pil_bilinear = "pil_bilinear"
    pil_nearest = "pil_nearest"  # Pillow's default filter of 2019: how the original tool's test vectors were made


class DataKind(Enum):
    digits = "digits"
    cifar10 = "cifar10"
    images = "images"
    arrays = "arrays"  # an .npz of the model's inputs as they are (core/data/datasets.py: ARRAY_EXPECTED)


class Relu6Equalization(Enum):
    keep = "keep"
    relu = "relu"


class Pow2Rounding(Enum):
    ceil = "ceil"
    nearest = "nearest"
    mse = "mse"


@dataclasses.dataclass(frozen=True)
class StoredPart:
    """A part of a stage's work that fewer choices reach than the whole stage (calibrate's statistics do not
    depend on the method), stored on its own so the configurations that share it compute it once
    (`StageContext.reuse`). Its key covers exactly what it names: the config keys (declared by the
    stage, or under one it declares), the stage's inputs, and `choices`, what the stage derived from
    the config (JSON values)."""

    name: str
    params: tuple[str, ...]
    inputs: tuple[str, ...]
    choices: tuple[tuple[str, Any], ...] = ()


def to_plain(node: Any) -> Any:
    """A config subtree as plain JSON-able data (Enums as their values)."""
    if isinstance(node, (DictConfig, ListConfig)):
        node = OmegaConf.to_container(node, resolve=True, enum_to_str=True)
    if dataclasses.is_dataclass(node):
        node = {spec.name: getattr(node, spec.name) for spec in dataclasses.fields(node)}
    if isinstance(node, dict):
        return {str(k): to_plain(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [to_plain(v) for v in node]
    if isinstance(node, Enum):
        return node.value
    return node
