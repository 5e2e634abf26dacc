"""The TF2IR IR on disk (seed 000): `net_def.json` + `params/<layer>_<kind>.npy`, written,
read back, and validated against the JSON Schema the records give (core/ir/schema.py). A layer whose name is not a
safe file name as it is (longer than PARAM_NAME_CHARACTERS, or a character beyond letters, digits, `_`, `.` and `-`:
litert-torch names its tensors by Python module paths hundreds of characters long) has its files under a short prefix
of its name and a digest of the whole (`param_file`); the IR keeps the name.

The JSON is written sorted and indented, and arrays with `np.save`, so emitting twice gives
byte-identical files and the store's digests stay stable.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from core.ir.network import Ir
from core.limits import human_bytes, npy_header
from core.ir.op import DIALECT_KEY, DIALECTS, dialect_of, is_network_input, loaded_kinds, schema_key
from core.ir import schema
from core.ir.records import IrError

NET_DEF_FILE = "net_def.json"
PARAMS_DIR = "params"
# a layer's part of its file names: well under the 255 bytes a file system allows, with room for the kind and the suffix
PARAM_NAME_CHARACTERS = 200
_SAFE_FILE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
DIGEST_CHARACTERS = 16


def param_file(directory: Path, layer: str, kind: str) -> Path:
    """`directory`/params/<layer>_<kind>.npy, the layer's name as it is where it is a safe file name (every name TF2IR's
    tools give); else its safe characters' first part, `~` (never in a name kept as it is, so the two kinds of names
    never meet) and a digest of the whole name: the same file for the same name, two names never one file."""
    if len(layer) <= PARAM_NAME_CHARACTERS and _SAFE_FILE_NAME.fullmatch(layer) and layer not in (".", ".."):
        return Path(directory) / PARAMS_DIR / f"{layer}_{kind}.npy"
    digest = hashlib.sha256(layer.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARACTERS]
    prefix = re.sub(r"[^A-Za-z0-9_.-]", "_", layer)[: PARAM_NAME_CHARACTERS - DIGEST_CHARACTERS - 1]
    return Path(directory) / PARAMS_DIR / f"{prefix}~{digest}_{kind}.npy"


def write_ir(ir: Ir, directory: Path, tensors: dict[str, dict[str, np.ndarray]] | None = None) -> None:
    """net_def.json and params/<layer>_<kind>.npy (constants, plus the test tensors in `tensors`)."""
    directory = Path(directory)
    (directory / PARAMS_DIR).mkdir(parents=True, exist_ok=True)
    (directory / NET_DEF_FILE).write_text(json.dumps(ir.to_json(), indent=2, sort_keys=True) + "\n")
    for source in (ir.params, tensors or {}):
        for layer, arrays in source.items():
            for kind, array in arrays.items():
                np.save(param_file(directory, layer, kind), np.asarray(array, order="C"), allow_pickle=False)


def read_ir(directory: Path) -> Ir:
    directory = Path(directory)
    path = directory / NET_DEF_FILE
    if not path.is_file():
        raise IrError(f"{path}: no IR here; expected the output directory of the emit_ir stage")
    try:
        layers = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise IrError(f"{path}: not JSON ({error}); expected the IR's list of layers") from None
    validate_ir(layers, origin=str(path))
    params = {}
    for layer in layers:
        # a kind the layer says it does not load (`load_bias: false`) has no file
        arrays = {kind: _read_param(param_file(directory, layer["name"], kind), layer, kind)
                  for kind in loaded_kinds(DIALECTS[dialect_of(layer)][layer["operation"]], layer)}
        if arrays:
            params[layer["name"]] = arrays
    return Ir.from_json(layers, params)


PARAM_DTYPES = (np.int8, np.int16, np.int32, np.int64)  # constants: int8 weights and tables (16x8 tables: int16), int32 biases (16x8's: int64)
FLOAT_PARAM_DTYPE = "float32"  # a kind whose `<kind>_dtype` field says so (float_conv's weight and bias)


def _read_param(path: Path, layer: dict[str, Any], kind: str) -> np.ndarray:
    """One constant of a layer; every kind its operation declares must be there, as a plain integer
    array, or a float32 one where the layer's `<kind>_dtype` is float32."""
    where = f"{path}: layer {layer['name']} ({layer['operation']})"
    if not path.is_file():
        raise IrError(f"{where} needs this file and it is missing; an IR directory is net_def.json plus every "
                      f"params/<layer>_<kind>.npy the emit_ir stage wrote")
    try:
        with path.open("rb") as stream:
            shape, dtype = npy_header(stream, where)
            data_bytes = path.stat().st_size - stream.tell()
        declared = math.prod(shape) * dtype.itemsize
        if declared > data_bytes:  # checked before np.load allocates what the header declares
            raise ValueError(f"its header declares {list(shape)} {dtype} ({human_bytes(declared)}), "
                             f"more than the {human_bytes(data_bytes)} of data the file holds")
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise IrError(f"{where}: not a readable .npy array ({error}); run emit_ir again to write it") from None
    if layer.get(f"{kind}_dtype") == FLOAT_PARAM_DTYPE:
        if not isinstance(array, np.ndarray) or array.dtype != np.float32 or not np.all(np.isfinite(array)):
            raise IrError(f"{where}: dtype {getattr(array, 'dtype', type(array).__name__)}, expected finite float32 "
                          f"({kind}_dtype is {FLOAT_PARAM_DTYPE})")
        return array
    if not isinstance(array, np.ndarray) or array.dtype not in PARAM_DTYPES:
        raise IrError(f"{where}: dtype {getattr(array, 'dtype', type(array).__name__)}, expected int8, int16, int32 or int64")
    return array


def validate_ir(layers: list[dict[str, Any]], origin: str = "IR") -> None:
    """Against the IR's JSON Schema (core/ir/schema.py, from the records), plus the one rule a schema
    cannot state: every layer reads only layers before it."""
    branches = schema.branches()
    if not isinstance(layers, list) or not layers:
        raise IrError(f"{origin}: expected a non-empty JSON list of layers")
    # one branch per operation: validating against the layer's own gives messages that name the field
    for position, layer in enumerate(layers):
        name = layer.get("name", f"#{position}") if isinstance(layer, dict) else f"#{position}"
        operation = layer.get("operation") if isinstance(layer, dict) else None
        key = schema_key(str(operation), dialect_of(layer))
        if key not in branches:
            raise IrError(f"{origin}: layer {name}: operation {operation!r} ({DIALECT_KEY} {dialect_of(layer)!r}) is not one of "
                          f"{', '.join(branches)}")
        errors = sorted(jsonschema.Draft202012Validator(branches[key]).iter_errors(layer), key=lambda e: list(e.absolute_path))
        if errors:
            where = "/".join(str(part) for part in errors[0].absolute_path) or "(layer)"
            raise IrError(f"{origin}: layer {name} ({operation}), {where}: {errors[0].message}")
    seen: set[str] = set()
    for layer in layers:
        if layer["name"] in seen or is_network_input(layer["name"]):  # names key the params files and every reference
            raise IrError(f"{origin}: two layers are named {layer['name']!r} (or one is named like a network input)")
        missing = [name for name in layer["previous_layer"] if name not in seen and not is_network_input(name)]
        if missing:
            raise IrError(f"{origin}: layer {layer['name']} reads {missing}, which are not earlier layers")
        seen.add(layer["name"])
