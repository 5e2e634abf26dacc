"""A `.tflite`'s tensors as TensorFlow values: the builder each operator's converter (tflite_graph.py, tflite_shapes.py)
writes its TensorFlow ops with, naming each after the operator's output, keeping an int8 (16x8) file's quantization as
FakeQuant nodes and each one's exact parameters."""

from __future__ import annotations

import re

from operator import attrgetter
from typing import Any, Callable

import numpy as np

from core.frontend.batched_constant import broadcast, of_every_element
from core.frontend.tflite import ACTIVATION_BITS, TfliteError, TfliteModel, TfliteOperator, TfliteTensor

INPUT_NAME = "input"
# TensorFlow's functions are named here and looked up on the module when a file is converted: importing
# TensorFlow takes seconds, and a run's configuration is checked before any of it is
_ACTIVATIONS = {"NONE": None, "RELU": "nn.relu", "RELU6": "nn.relu6"}


def dequantized(tensor: TfliteTensor) -> np.ndarray:
    """A constant's real values: (q - zero point) x scale along its quantized axis, float32."""
    assert tensor.data is not None, "a constant's values"
    values = tensor.data.astype(np.float64)
    if tensor.quantization is None or tensor.dtype == "FLOAT32":
        return values.astype(np.float32)
    shape = [1] * values.ndim
    if tensor.quantization.per_channel:
        shape[tensor.quantization.axis] = -1
    scale = tensor.quantization.scale.astype(np.float64).reshape(shape)
    return ((values - tensor.quantization.zero_point.reshape(shape)) * scale).astype(np.float32)


class TfBuilder:
    """Writes the operators into the default graph, naming each node after its operator's output."""

    def __init__(self, model: TfliteModel, tf):
        self.model, self.tf = model, tf
        self.values: dict[int, Any] = {}  # tensor index -> the TensorFlow value computing it
        self.used: set[str] = set()  # scopes given
        self.parameters: dict[str, dict[str, list]] = {}  # FakeQuant node -> the file's scale(s) and zero point(s)

    def scope(self, operator: TfliteOperator) -> str:
        """The TensorFlow scope of the operator's ops, from its output tensor's name: the characters a scope takes, and
        from its first letter or digit (a root scope starts with one: litert-torch's `__main__.M5/...` does not)."""
        first = self.model.tensor(operator.outputs[0]).name.split(";")[0]
        base = "".join(c if c.isalnum() or c in "_./-" else "_" for c in first)
        base = re.sub(r"^[^A-Za-z0-9]+", "", base).rstrip("/.") or operator.name.lower()
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def function(self, name: str) -> Callable:
        """TensorFlow's function `name` ("nn.conv2d")."""
        return attrgetter(name)(self.tf)

    def const(self, name: str, value: Any):
        return self.tf.constant(np.asarray(value, np.float32), name=name)

    def activation_quant(self, x, index: int, scope: str):
        """x with its tensor's int8 (16x8 mode: int16) range as a FakeQuant (unchanged for a float tensor)."""
        tensor = self.model.tensor(index)
        if tensor.dtype not in ACTIVATION_BITS or tensor.quantization is None:
            return x
        bits = ACTIVATION_BITS[tensor.dtype]
        scale, zero_point = float(tensor.quantization.scale[0]), int(tensor.quantization.zero_point[0])
        name = f"{scope}/act_quant/FakeQuantWithMinMaxVars"
        self.parameters[name] = {"scale": [scale], "zero_point": [zero_point]}
        qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        low, high = self.const(f"{name}/min", (qmin - zero_point) * scale), self.const(f"{name}/max", (qmax - zero_point) * scale)
        return self.tf.quantization.fake_quant_with_min_max_vars(x, low, high, num_bits=bits, narrow_range=False, name=name)

    def weight(self, index: int, scope: str, values: np.ndarray, channel_axis_last: bool = True):
        """A weight constant (already in TensorFlow's layout, output channels last), behind its per-channel
        narrow FakeQuant in an int8 model."""
        tensor = self.model.tensor(index)
        kernel = self.const(f"{scope}/kernel", values)
        if tensor.quantization is None or tensor.dtype != "INT8":
            return kernel
        if not channel_axis_last:  # its exact parameters only: the dequantized values are already on the grid
            self.parameters[kernel.op.name] = {"scale": [float(s) for s in tensor.quantization.scale],
                                               "zero_point": [0] * len(tensor.quantization.scale)}
            return kernel
        scales = np.broadcast_to(tensor.quantization.scale.astype(np.float64), (values.shape[-1],))
        name = f"{scope}/weights_quant/FakeQuantWithMinMaxVarsPerChannel"
        self.parameters[name] = {"scale": [float(s) for s in scales], "zero_point": [0] * len(scales)}
        return self.tf.quantization.fake_quant_with_min_max_vars_per_channel(
            kernel, self.const(f"{name}/min", -127 * scales), self.const(f"{name}/max", 127 * scales), num_bits=8, narrow_range=True,
            name=name)

    def bias(self, operator: TfliteOperator, scope: str):
        if len(operator.inputs) < 3 or operator.inputs[2] < 0:
            return None
        tensor = self.model.tensor(operator.inputs[2])
        assert tensor.data is not None, "a bias is a constant (tflite.py: CONSTANT_OPERANDS)"
        # a bias of shape [1, 1, 1, C] (litert-torch's, a layer scale folded in) is the vector BiasAdd adds
        if tensor.dtype == "FLOAT32" or tensor.quantization is None:
            return self.const(f"{scope}/bias", tensor.data.reshape(-1))
        return self.const(f"{scope}/bias", (tensor.data.astype(np.float64) * tensor.quantization.scale.astype(np.float64)).reshape(-1))

    def finish(self, operator: TfliteOperator, x, scope: str):
        """The fused activation and the output's FakeQuant."""
        if operator.activation not in _ACTIVATIONS:
            raise TfliteError(f"{self.model.path}: operator {operator.index} ({operator.name}): fused activation {operator.activation}; "
                              f"the importer takes {', '.join(_ACTIVATIONS)}")
        if (function := _ACTIVATIONS[operator.activation]) is not None:
            x = self.function(function)(x, name=f"{scope}/{operator.activation.capitalize()}")
        return self.activation_quant(x, operator.outputs[0], scope)

    def input(self, operator: TfliteOperator, position: int = 0):
        index = operator.inputs[position]
        if index in self.values:
            return self.values[index]
        tensor = self.model.tensor(index)
        if tensor.data is None:
            raise TfliteError(f"{self.model.path}: operator {operator.index} ({operator.name}) reads tensor {index} ({tensor.name}), "
                              "which no earlier operator computes")
        return self.const(f"const_{index}", dequantized(tensor))

    def operands(self, operator: TfliteOperator, scope: str, concatenated: bool = False) -> list:
        """The operator's inputs, a constant among computed ones broadcast to their batch (batched_constant.py) where it
        holds a value for every element of theirs or is `concatenated`; its FakeQuant, in an int8 file, the file's."""
        indices = list(operator.inputs)
        computed = [index for index in indices if self.model.tensor(index).data is None or index in self.values]
        values, like = [], self.model.tensor(computed[0]).shape if computed else ()
        for position, index in enumerate(indices):
            value = self.input(operator, position)
            if computed and index not in computed and (concatenated or of_every_element(dequantized(self.model.tensor(index)), like)):
                value = broadcast(self.tf, value, self.input(operator, indices.index(computed[0])), f"{scope}/operand_{position}")
                value = self.activation_quant(value, index, f"{scope}/operand_{position}")
            values.append(value)
        return values

    def ranks_aligned(self, operator: TfliteOperator, values: list, scope: str) -> list:
        """An elementwise operator's computed operands of a lower rank than another's Reshaped to it by axes of one after
        the batch: the file's broadcasting pads a shape on the left, before its batch of one, which the reader has
        given back as axis 0 (tflite_batch.py: a litert-torch LSTM step's state projection [1, 4H] added to the step
        [1, 1, 4H]); left as they are, the batch of one operand would meet an axis of the other on a batch."""
        ranks = {position: len(self.model.tensor(index).shape) for position, index in enumerate(operator.inputs)
                 if self.model.tensor(index).data is None or index in self.values}
        if len(set(ranks.values())) < 2:
            return values
        rank = max(ranks.values())
        return [self.tf.reshape(value, [-1, *[1] * (rank - ranks[position]), *self.model.tensor(operator.inputs[position]).shape[1:]],
                                name=f"{scope}/operand_{position}_ranked") if ranks.get(position, rank) < rank else value
                for position, value in enumerate(values)]


def constant_input(b: TfBuilder, op: TfliteOperator, position: int) -> np.ndarray:
    tensor = b.model.tensor(op.inputs[position])
    if tensor.data is None:
        raise TfliteError(f"{b.model.path}: operator {op.index} ({op.name}): input {position} is computed; the importer takes a constant")
    return tensor.data


