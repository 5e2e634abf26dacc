"""crop (TF2IR 1.2; the tflite_int8 dialect's STRIDED_SLICE since 1.3, and SLICE): Keras' Cropping2D as a StridedSlice of height
and width (pattern.py; the deconv pattern, first in order, takes the StridedSlice of a Conv2DTranspose's output size);
the record (record.py); its kernel, a slice; sharing its input's scale (an IDENTITY annotate rule)."""

from __future__ import annotations

import numpy as np

from core.frontend.layers import AnnotateRule, Layer, QKind
from core.ir.op import IrContext, IrOp, register_op
from core.ir.ops.crop.pattern import PATTERN
from core.ir.edges import edge_fields
from core.ir.ops.crop.record import CropLayer
from core.ir.ops.crop.tflite import crop_from_tflite, slice_from_tflite


def crop_fields(layer: Layer, ctx: IrContext) -> dict:
    return edge_fields(layer, ctx, "crop")


def crop_kernel(record: CropLayer, params: dict, inputs: list) -> np.ndarray:
    crop, (height, width) = record.crop, record.output_size.pair()
    return np.ascontiguousarray(np.asarray(inputs[0], record.integer_dtype)[:, crop.top : crop.top + height, crop.left : crop.left + width])


CROP = register_op(IrOp("crop", CropLayer, AnnotateRule(inputs=(QKind.IDENTITY,), output=QKind.IDENTITY), (PATTERN,), crop_fields, crop_kernel,
                         builders={"STRIDED_SLICE": crop_from_tflite, "SLICE": slice_from_tflite}, activation_widths=(8, 16)))
