"""The IR's field vocabulary: what each field shared by several operations means, as the JSON Schema
fragment of its value with its description. One definition per field: an operation's record
(core/ir/ops/<op>/record.py) declares which fields it has, and its `schema` adds the fields only it
has (or means otherwise); core/ir/schema.py builds schemas/tf2ir_ir.schema.json from the two."""

from __future__ import annotations

def size_object(description: str | None = None) -> dict:
    """The schema of a {"height": h, "width": w} field (sizes, strides, dilations, kernels), both at least 1."""
    schema = {'additionalProperties': False,
              'properties': {'height': {'minimum': 1, 'type': 'integer'}, 'width': {'minimum': 1, 'type': 'integer'}},
              'required': ['height', 'width'],
              'type': 'object'}
    return {**schema, 'description': description} if description else schema


def shape_array(description: str | None = None) -> dict:
    """The schema of a tensor shape field (one image's: no batch dimension), every dimension at least 1."""
    schema = {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}, 'minItems': 1}
    return {**schema, 'description': description} if description else schema


FIELDS: dict[str, dict] = {
    'name': {'description': "The TensorFlow op name with '/' replaced by '_'.",
             'pattern': '^[^/]+$',
             'type': 'string'},
    'previous_layer': {'description': "The producers of this layer's inputs in the order they were processed (seed "
                                      '000, 5.5: a producer is recorded as it is processed, the network input '
                                      'first); an operation with several inputs names them in their order in its own '
                                      'fields (add: pl_name, add_name; concat2: input0_name, input1_name; concat: '
                                      "input_names; mul: input0_name, input1_name). 'input' is the network input (a network of several "
                                      "inputs: 'input:<name>' each, named as the model names it, 1.4), an "
                                      "int8 tensor at its readers' input log2scale (the input mapped to int8 at the "
                                      'log2scale calibration chose for it, or target.scheme.input_log2scale: round half up, '
                                      'saturated).',
                       'items': {'minLength': 1, 'type': 'string'},
                       'minItems': 1,
                       'type': 'array'},
    'next_layer': {'description': "Consumers of this layer's output; ['endpoint'] when the output is a network end "
                                  'point.',
                   'items': {'minLength': 1, 'type': 'string'},
                   'minItems': 1,
                   'type': 'array'},
    'activation_type': {'description': 'Relu6: after the output shift, clamp to [0, 6 * 2^output_log2scale], then '
                                       'saturate to int8. Relu: after the output shift, clamp below at 0, then '
                                       'saturate to int8. None: saturate only.',
                        'enum': ['Relu6', 'Relu', 'None']},
    'input_log2scale': {'description': 'real value = int8 value * 2^-log2scale', 'type': 'integer'},
    'weight_log2scale': {'description': 'real value = int8 value * 2^-log2scale', 'type': 'integer'},
    'bias_log2scale': {'description': 'real value = int8 value * 2^-log2scale', 'type': 'integer'},
    'output_log2scale': {'description': 'real value = int8 value * 2^-log2scale', 'type': 'integer'},
    'output_shift': {'description': 'input_log2scale + weight_log2scale - output_log2scale. The int32 accumulator is '
                                    'shifted right by it with round half up: (acc + (1 << (output_shift - 1))) >> '
                                    'output_shift, arithmetic shift; no rounding term when output_shift is 0.',
                     'minimum': 0,
                     'type': 'integer'},
    'bias_shift': {'description': 'input_log2scale + weight_log2scale - bias_log2scale: the int8 bias is shifted '
                                  'left by it and added to the int32 accumulator before the output shift.',
                   'minimum': 0,
                   'type': 'integer'},
    'load_bias': {'description': 'Whether the layer adds a bias (params/<name>_bias.npy).', 'type': 'boolean'},
    'input_channel_num': {'minimum': 1, 'type': 'integer'},
    'output_channel_num': {'minimum': 1, 'type': 'integer'},
    'input_size': size_object(),
    'output_size': size_object(),
    'padding': {'additionalProperties': False,
                'description': 'Explicit zero padding in elements (TF SAME: total = max((out-1)*stride + '
                               '(k-1)*dilation + 1 - in, 0), top = total // 2, bottom = total - top; left/right '
                               'likewise).',
                'properties': {'bottom': {'minimum': 0, 'type': 'integer'},
                               'left': {'minimum': 0, 'type': 'integer'},
                               'right': {'minimum': 0, 'type': 'integer'},
                               'top': {'minimum': 0, 'type': 'integer'}},
                'required': ['top', 'bottom', 'left', 'right'],
                'type': 'object'},
    'stride': size_object(),
    'dilations': size_object('Dilation per axis; strides must be 1 when a dilation exceeds 1.'),
    'kernel_size': size_object(),
    'input_dtype': {'const': 'int8'},
    'output_dtype': {'const': 'int8'},
    'weight_dtype': {'const': 'int8'},
    'bias_dtype': {'const': 'int8'},
    'dtype': {'const': 'int8'},
    'input_pre_ls': {'description': 'output_log2scale - input_log2scale: inputs are shifted left by it before '
                                    'averaging; avg_pool divides the int32 window sum by the number of non-padding '
                                    'elements with round half up, floor((2*sum + n) / (2*n)), then saturates.',
                     'minimum': 0,
                     'type': 'integer'},
    'dim': {'enum': ['H', 'W', 'C']},
    'input0_log2scale': {'description': 'real value = int8 value * 2^-log2scale', 'type': 'integer'},
    'input1_log2scale': {'description': 'real value = int8 value * 2^-log2scale', 'type': 'integer'},
    'align_corners': {'type': 'boolean'},
    'half_pixel_centers': {'type': 'boolean'},
    # the tflite_int8 dialect (1.2)
    'scheme': {'const': 'tflite_int8', 'description': 'The layer is of the tflite_int8 dialect: TFLite\'s int8 arithmetic.'},
    'input_scale': {'type': 'number', 'exclusiveMinimum': 0, 'description': 'real value = input_scale * (int8 value - input_zero_point)'},
    'input_zero_point': {'type': 'integer', 'minimum': -128, 'maximum': 127},
    'output_scale': {'type': 'number', 'exclusiveMinimum': 0, 'description': 'real value = output_scale * (int8 value - output_zero_point)'},
    'output_zero_point': {'type': 'integer', 'minimum': -128, 'maximum': 127},
    'output_min': {'type': 'integer', 'minimum': -32768, 'maximum': 32767,
                   'description': "The fused activation's clamp (low), int8 (int16 where activation_bits is 16)."},
    'output_max': {'type': 'integer', 'minimum': -32768, 'maximum': 32767,
                   'description': "The fused activation's clamp (high), int8 (int16 where activation_bits is 16)."},
    'activation_bits': {'const': 16,
                        'description': "The layer's activations are int16 (TFLite's 16x8 mode: zero points 0, int64 biases, int8 "
                                       "weights); absent: int8."},
    'rounding': {'enum': ['double', 'single', 'reduced'],
                 'description': "TFLite's requantization: double (SaturatingRoundingDoublingHighMul then RoundingDivideByPOT: "
                                'convolutions, and FULLY_CONNECTED on TFLite Micro) or single (one rounding of the 64-bit product, '
                                "cast to int32: FULLY_CONNECTED on LiteRT's reference kernels), or reduced (the 16x8 kernels' int64 "
                                'sums: the multiplier rounded to 16 bits, one rounding of the 64-bit product).'},
}
