"""The calibration table: what calibrate decides and annotate (and later emit-IR
and simulate) obey.

Every entry carries the exact float `range` [min, max] a FakeQuant node would
use, so annotation is mechanical, and the scheme's view of it
(core/quantize/schemes/): `log2scale` on a power-of-two target (real = int *
2^-log2scale), `scale` (and `zero_point` for an affine activation, real = (int -
zero_point) * scale) on TensorFlow Lite's int8. Stored as `calibration_table.json` (sorted keys,
so equal tables are equal bytes).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.quantize.grid import AffineGrid, ChannelGrid, Grid, Pow2Grid

TABLE_FILE = "calibration_table.json"
# an entry's `method` when the scheme, not a calibration method, decided it: a range the scheme's kernels fix
# (TFLite's softmax output, [0, 255/256]: what it clips is the kernel's doing) or one an output keeps from its input
SCHEME_DECIDED = frozenset({"fixed", "input"})


class CalibrationError(ValueError):
    """A table that cannot be made for this graph and target; the message names the tensor and the key."""


@dataclass
class TensorEntry:
    kind: str  # "input" | "activation" | "weight" | "bias"
    method: str  # the method that chose the threshold (weights: "absmax"; qat: "qat")
    threshold: float  # clipping threshold on |x|
    range: list[float]  # [min, max] as a FakeQuant takes it
    log2scale: int | None = None  # power-of-two targets
    scale: float | None = None  # float-scale targets
    zero_point: int | None = None  # affine activations (tflite_int8): real = (int - zero_point) * scale
    narrow_range: bool = False  # integers in [-127, 127] (tflite_int8 weights): -128 unused
    bits: int | None = None  # its integers' width where it is not the table's (tflite_int16x8's weights: 8)
    # per output channel (float-scale targets, per-channel weights): [[min, max], ...] and scales
    channel_ranges: list[list[float]] | None = None
    channel_scales: list[float] | None = None
    absmax: float | None = None
    clipped_fraction: float | None = None  # share of calibration values beyond the threshold
    layer: str | None = None  # the layer producing (or owning) the tensor
    # a bias's correction (calib.bias_correction), per channel: the quantized layer adds bias + correction
    correction: list[float] | None = None
    warnings: list[str] = field(default_factory=list)
    # why the configured method did not choose it (its argument does not hold for this tensor) and `method` did
    fallback_reason: str | None = None

    @property
    def grid(self) -> Grid:
        """What the entry's integers mean, typed (core/quantize/grid.py)."""
        if self.log2scale is not None:
            return Pow2Grid(self.log2scale)
        if self.zero_point is not None and self.scale is not None:
            return AffineGrid(self.scale, self.zero_point)
        if self.channel_scales is not None:
            return ChannelGrid(tuple(self.channel_scales))
        if self.scale is not None:
            return ChannelGrid((self.scale,))
        raise CalibrationError(f"a {self.kind} entry ({self.method}) has no scale: neither a log2scale, a scale nor channel scales; "
                               "re-run calibrate")


# written only when they say something: a power-of-two table is the same bytes as before they existed
_OMITTED_WHEN_DEFAULT = {"zero_point": None, "narrow_range": False, "fallback_reason": None, "bits": None}


def _entry_json(entry: TensorEntry) -> dict:
    return {key: value for key, value in asdict(entry).items() if key not in _OMITTED_WHEN_DEFAULT or value != _OMITTED_WHEN_DEFAULT[key]}


def corrected(entry: TensorEntry, value):
    """A constant as the quantized layer uses it: a bias plus its correction, if any."""
    return value if entry.correction is None else (np.asarray(value, np.float64) + np.asarray(entry.correction)).astype(np.float32)


@dataclass
class CalibrationTable:
    method: str
    target: str
    bits: int
    tensors: dict[str, TensorEntry]  # activation tensors ('node:0') and constants ('const:0')
    # layers kept in float (calib.keep_float): their weights and biases have no entries, their
    # output does (the layer quantizes what it hands on); emit-IR writes them as float operations
    float_layers: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        document = {
            "method": self.method,
            "target": self.target,
            "bits": self.bits,
            "tensors": {name: _entry_json(entry) for name, entry in sorted(self.tensors.items())},
            "float_layers": sorted(self.float_layers),
        }
        return json.dumps(document, indent=1, sort_keys=True) + "\n"

    def save(self, directory: Path) -> None:
        (Path(directory) / TABLE_FILE).write_text(self.to_json())

    @classmethod
    def load(cls, directory: Path) -> "CalibrationTable":
        path = Path(directory) / TABLE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no calibration table; expected the output directory of the calibrate stage")
        document: dict[str, Any] = json.loads(path.read_text())
        tensors = {name: TensorEntry(**entry) for name, entry in document["tensors"].items()}
        return cls(document["method"], document["target"], document["bits"], tensors, list(document.get("float_layers", [])))

    def bits_of(self, entry: TensorEntry) -> int:
        """The width of an entry's integers: its own, else the table's."""
        return entry.bits or self.bits

    def entry(self, tensor: str) -> TensorEntry:
        if tensor not in self.tensors:
            raise KeyError(f"tensor {tensor} has no calibration entry; re-run calibrate")
        return self.tensors[tensor]
