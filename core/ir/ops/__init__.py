"""Every IR operation, one folder each; importing this package imports them all, so `OPS`
(operation name -> IrOp) and the activation registry are complete. Adding an operation is
adding a folder here: its record's fields and `schema` make its branch of the IR's JSON Schema
(core/ir/schema.py).

A folder holds what its operation is: the graph pattern (pattern.py), the typed IR record
with its shapes, MACs, shifts and accumulator bound (record.py), its fields and constants
from a calibrated graph (emit.py), its integer kernel (kernel.py), and the registration with
its annotate rule (__init__.py). How a backend emits an operation is the backend's
(core/backends/*/ops/)."""

import importlib
import pkgutil

from core.ir.op import OPS

for _module in sorted(module.name for module in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["OPS"]
