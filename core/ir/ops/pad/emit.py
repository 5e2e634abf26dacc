"""A matched pad layer as IR fields."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.edges import edge_fields
from core.ir.op import IrContext


def pad_fields(layer: Layer, ctx: IrContext) -> dict:
    return edge_fields(layer, ctx, "padding")
