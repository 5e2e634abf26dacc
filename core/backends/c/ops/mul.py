"""mul, of both dialects, as C99 (the contract: core/backends/c/emitter.py): its element-wise arithmetic
(core/ir/ops/mul/kernel.py: mul_arithmetic with the record's requantization) rendered as every such operation's
(core/backends/c/elementwise.py); a constant second factor is read from `<symbol>_constant`."""

from __future__ import annotations

from core.backends.c.elementwise import elementwise_c
from core.backends.c.emitter import emits
from core.ir.ops.mul.kernel import record_mul
from core.ir.ops.mul.record import MulLayer


@emits("mul")
def mul_emit_c(record: MulLayer, symbol: str) -> str:
    return elementwise_c(record, symbol, record_mul, ["in0", f"{symbol}_constant" if record.load_constant else "in1"])
