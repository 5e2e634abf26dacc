"""The IR's JSON Schema, built from the operations' records: each record's dataclass fields say
which keys a layer of it has and which are required (all but those it may omit: `omitted_when`,
`optional`), its `schema` (core/ir/records.OpSchema) its description and the definitions only it
has, and core/ir/fields.py what every shared field means. Nothing is written twice.

`python -m core.ir.schema` writes schemas/tf2ir_ir.schema.json, the published copy users read
and validate with; a test keeps it equal to what the records give."""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

from core.ir.fields import FIELDS
from core.ir.op import DIALECTS, schema_key
from core.ir.ops import OPS  # noqa: F401  (every operation registered)
from core.ir.records import BASE_DIALECT, BITS_KEY, DIALECT_KEY, IrError, IrLayer, json_fields, omits_default

VERSION = "1.5"
# written here from the records (python -m core.ir.schema), never read: a test keeps it their image
DATA_FILES = ("schemas/tf2ir_ir.schema.json",)
SCHEMA_FILE = Path(__file__).resolve().parents[2] / DATA_FILES[0]
_HEADER = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://quanttool.invalid/schemas/tf2ir_ir.schema.json",
    "title": "TF2IR layer IR (net_def.json)",
    "description": (
        f"TF2IR {VERSION}: an ordered list of layers in the traversal order of seed 000, 5.3; each layer reads only the "
        "network input and earlier layers. A superset of 1.0 (seed 000's layers, byte-identical): the operations and "
        "fields marked x-since 1.1 are extensions (docs/IR.md). Tensors live in params/<name>_<kind>.npy: conv weight "
        "HWCiCo, dwconv weight HWC, bias C, lut table [256], feature maps HWC, all int8 but the float32 weights and biases "
        "of float_conv and float_dwconv (add: _pl, _add, _output; concat2, mul: _input0, _input1; concat: _input0 .. "
        "_inputN; others: _input, _output). Shifts round half up; results saturate to [-128, 127]. 1.2 adds the "
        "tflite_int8 dialect: layers with \"scheme\": \"tflite_int8\" carry scales and zero points instead of log2scales, "
        "TFLite's requantization (multiplier and shift, int32 [O] params of conv and dwconv) and TFLite's rounding; "
        "their conv weights are OHWI, biases int32. 1.3 adds transpose and batch_matmul (a multi-head attention's heads "
        "and its products of two activations), in both dialects. 1.4 adds gather (an Embedding of int32 token ids), in both "
        "dialects, and networks of several inputs (previous_layer names each 'input:<name>')."),
    "type": "array",
    "minItems": 1,
    "x-tf2ir-version": VERSION,
}


def layer_schema(record: type[IrLayer], dialect: str) -> dict:
    """The JSON Schema of one layer of `record`'s operation in `dialect`."""
    op_schema = record.schema
    properties: dict[str, dict] = {"operation": {"const": record.operation}}
    required = ["operation"]
    if len(record.dialects) > 1 and dialect != BASE_DIALECT:
        properties[DIALECT_KEY], required = {**FIELDS[DIALECT_KEY], "const": dialect}, [*required, DIALECT_KEY]
        properties[BITS_KEY] = FIELDS[BITS_KEY]
    for spec in json_fields(record, dialect):
        keys = spec.metadata["grid"].keys(dialect) if "grid" in spec.metadata else (spec.name,)
        for key in keys:
            definition = op_schema.definition(key, dialect) or FIELDS.get(key)
            if definition is None:
                raise IrError(f"operation {record.operation}: field {key} has no definition: give it one in "
                              f"{record.__name__}.schema.fields, or in core/ir/fields.py when other operations share it")
            properties[key] = definition
        if "grid" in spec.metadata or not (omits_default(spec, dialect) or spec.metadata.get("optional")):
            required.extend(keys)
    branch = {"type": "object", "description": op_schema.in_dialect("doc", dialect), "required": required,
              "properties": properties, "additionalProperties": False}
    if op_schema.in_dialect("since", dialect) is not None:
        branch["x-since"] = op_schema.in_dialect("since", dialect)
    return branch


@lru_cache(maxsize=1)
def branches() -> dict[str, dict]:
    """One branch per operation of each dialect (validating a layer against its own gives messages that name
    the field): seed 000's operations first, then each version's additions, by name within each."""
    ordered = sorted(((schema_key(name, dialect), dialect, op) for dialect, ops in DIALECTS.items() for name, op in ops.items()),
                     key=lambda item: (item[2].record.schema.in_dialect("since", item[1]) or "1.0", item[0]))
    return {key: layer_schema(op.record, dialect) for key, dialect, op in ordered}


def ir_schema() -> dict:
    return {**_HEADER, "items": {"oneOf": list(branches().values())}}


def schema_text() -> str:
    return json.dumps(ir_schema(), indent=2) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_FILE
    target.write_text(schema_text())
    print(f"wrote {target}")
