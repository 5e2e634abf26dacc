"""The accelerator lowering of every IR operation, or its declaration as host-only, one module
each, or, for an element-wise operation without either, its definition rendered on the ALU
(core/backends/accel/elementwise.py); importing this package registers them all (core.backends.accel.lowering:
LOWERINGS, HOST_ONLY). Every IR operation is in exactly one of the two (tests/test_structure.py)."""

import importlib
import pkgutil

from core.backends.accel.elementwise import register_elementwise
from core.backends.accel.lowering import HOST_ONLY, LOWERINGS, LoweringError, OpLowering
from core.ir.ops import OPS

for _module in sorted(module.name for module in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
for _operation in OPS.values():
    if _operation.elementwise is not None and _operation.name not in LOWERINGS and _operation.name not in HOST_ONLY:
        register_elementwise(_operation.name, _operation.elementwise)


def host_only_errors(accelerator) -> list[str]:
    """The patterns of `accelerator` that name an operation its dialect's lowerings declare host-only: each an error
    (what runs where is declared once: an operation no pattern names is on the host, and the host-only ones can
    be named by none)."""
    return [f"accelerator.patterns[{index}] ({pattern.name}): {operation} cannot run on the accelerator "
            f"({HOST_ONLY[operation]}); remove it from the pattern"
            for index, pattern in enumerate(accelerator.patterns) for operation in pattern.operations
            if operation in HOST_ONLY]


def lowering_of(operation: str) -> OpLowering | None:
    """How `operation` runs on the accelerator; None for a host-only operation."""
    if operation in LOWERINGS:
        return LOWERINGS[operation]
    if operation in HOST_ONLY:
        return None
    raise LoweringError(f"operation {operation} is neither lowered to the accelerator nor declared host-only "
                        f"(core/backends/accel/ops/)")


__all__ = ["HOST_ONLY", "LOWERINGS", "host_only_errors", "lowering_of"]
