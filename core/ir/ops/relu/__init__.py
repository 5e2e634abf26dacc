"""Relu as a fused activation (the IR's activation_type "Relu"): the layer's int8 result clamped
at 0 from below (the int8 saturation stays the upper bound). Registered here, it is absorbed after
a conv, dwconv or add (core/ir/activations.py), quantized, emitted, simulated, written as C and
lowered to the accelerator's MAX/MIN with no other change."""

from core.ir.activations import Activation, register_activation
from core.ir.fixedpoint import INT8_MAX

RELU = register_activation(Activation("Relu", ("Relu",), "relu", lambda log2scale: 0, lambda log2scale: INT8_MAX))
