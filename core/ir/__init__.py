"""The TF2IR IR (seed 000): typed layer records (records.py) and one folder per operation
(ops/<op>/: pattern, annotate rule, record, fields, kernel), the fixed-point arithmetic
(fixedpoint.py), fused activations, IR emission from a calibrated layer graph, the IR on disk
with its JSON Schema, and the integer simulator; the tflite_int8 scheme's kernels (ops/<op>/affine.py) and
a .tflite run on them (tflite_interpreter.py). May import core.data, core.frontend and
core.quantize."""
