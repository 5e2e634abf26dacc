"""avg_pool and max_pool (seed 000, 4.2 AVGPOOL/MAXPOOL), including Keras's global average
(a spatial Mean): patterns (pattern.py), typed records (record.py), fields (emit.py), integer
kernels (kernel.py)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.pool.affine_record import (AvgPoolAffineLayer, MaxPoolAffineLayer, avg_pool_affine_kernel, max_pool_affine_kernel,
                                           mean_from_tflite, pool_from_tflite)
from core.ir.ops.pool.emit import avg_pool_fields, max_pool_fields
from core.ir.ops.pool.kernel import avg_pool_kernel, max_pool_kernel
from core.ir.ops.pool.pattern import AVG_POOL, GLOBAL_MEAN, MAX_POOL
from core.ir.ops.pool.record import AvgPoolLayer, MaxPoolLayer

# TVM treats avg_pool as identity-like, but the TF2IR hardware gives its output a
# scale of its own (input_pre_ls), so it is annotated like an activation.
AVG = register_op(IrOp("avg_pool", AvgPoolLayer, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION),
                       (AVG_POOL, GLOBAL_MEAN), avg_pool_fields, avg_pool_kernel))
MAX = register_op(IrOp("max_pool", MaxPoolLayer, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.INPUT), (MAX_POOL,),
                       max_pool_fields, max_pool_kernel))

AVG_AFFINE = register_affine_op(AffineOp("avg_pool", AvgPoolAffineLayer, avg_pool_affine_kernel,
                                         {"AVERAGE_POOL_2D": pool_from_tflite, "MEAN": mean_from_tflite}))
MAX_AFFINE = register_affine_op(AffineOp("max_pool", MaxPoolAffineLayer, max_pool_affine_kernel, {"MAX_POOL_2D": pool_from_tflite}))
