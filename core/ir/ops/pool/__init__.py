"""avg_pool and max_pool (seed 000, 4.2 AVGPOOL/MAXPOOL), including Keras's global average
(a spatial Mean) and global max (a spatial Max, core/frontend/canonicalize.py): patterns (pattern.py), typed records of both dialects (record.py), fields (emit.py), integer kernels
(kernel.py), a .tflite's pools read as records (tflite.py) and MEAN's folded requantization (affine.py)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.pool.emit import avg_pool_fields, max_pool_fields
from core.ir.ops.pool.kernel import avg_pool_kernel, max_pool_kernel
from core.ir.ops.pool.pattern import AVG_POOL, GLOBAL_MEAN, MAX_POOL
from core.ir.ops.pool.record import AvgPoolLayer, MaxPoolLayer
from core.ir.ops.pool.tflite import mean_from_tflite, pool_from_tflite, reduce_max_from_tflite, sum_from_tflite

# TVM treats avg_pool as identity-like, but the TF2IR hardware gives its output a
# scale of its own (input_pre_ls), so it is annotated like an activation.
AVG = register_op(IrOp("avg_pool", AvgPoolLayer, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION),
                       (AVG_POOL, GLOBAL_MEAN), avg_pool_fields, avg_pool_kernel,
                       builders={"AVERAGE_POOL_2D": pool_from_tflite, "MEAN": mean_from_tflite,
                                                                   "SUM": sum_from_tflite}, activation_widths=(8, 16)))
MAX = register_op(IrOp("max_pool", MaxPoolLayer, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.INPUT), (MAX_POOL,),
                       max_pool_fields, max_pool_kernel, builders={"MAX_POOL_2D": pool_from_tflite, "REDUCE_MAX": reduce_max_from_tflite},
                       activation_widths=(8, 16)))

