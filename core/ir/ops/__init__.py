"""The IR operations, one module each; importing this package registers them all."""

from core.ir.ops import add, conv, pool, shape_ops  # noqa: F401  (registration)
from core.ir.ops.registry import IR_OPS, AnnotateRule, GraphIndex, IrOp, Layer, QKind

__all__ = ["IR_OPS", "AnnotateRule", "GraphIndex", "IrOp", "Layer", "QKind"]
