"""The C emitter of every IR operation, one module each, or, for an element-wise operation without one, its definition
rendered per element (core/backends/c/elementwise.py); importing this package registers them all in
core.backends.c.emitter.C_EMITTERS."""

import importlib
import pkgutil

import numpy as np

from core.backends.c.elementwise import elementwise_emitter
from core.backends.c.emitter import C_EMITTERS, C_PACKERS, CodegenError, PackedConstant
from core.ir.ops import OPS
from core.ir.records import IrLayer

for _module in sorted(module.name for module in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
# an element-wise operation without an emitter of its own: its one definition rendered per element
for _operation in OPS.values():
    if _operation.elementwise is not None and _operation.name not in C_EMITTERS:
        C_EMITTERS[_operation.name] = elementwise_emitter(_operation.elementwise)


def emit_c(record: IrLayer, symbol: str) -> str:
    """The layer's C function (the contract of core/backends/c/emitter.py)."""
    emitter = C_EMITTERS.get(record.operation)
    if emitter is None:
        raise CodegenError(f"layer {record.name}: operation {record.operation} has no C emitter (core/backends/c/ops/)")
    return emitter(record, symbol)


def pack_c(record: IrLayer, params: dict[str, np.ndarray]) -> list[PackedConstant] | None:
    """The layer's constants as its SIMD path reads them; None for an operation without a packer."""
    packer = C_PACKERS.get(record.operation)
    return None if packer is None else packer(record, params)


__all__ = ["C_EMITTERS", "C_PACKERS", "emit_c", "pack_c"]
