"""Relu6 as a fused activation (the IR's activation_type "Relu6"): clamp to
[0, floor(6 * 2^output_log2scale + 1/2)], the round half up of 6 at the output scale."""

from core.ir.activations import Activation, register_activation
from core.ir.fixedpoint import relu6_limit

RELU6 = register_activation(Activation("Relu6", ("Relu6",), "relu6", lambda log2scale: 0, relu6_limit))
