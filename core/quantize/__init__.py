"""Quantization decisions and their cost in float: calibration statistics (in-graph), the
threshold methods (calibration/methods, one file each), the calibration table and its
construction, the simulated-quantization annotation (FakeQuant insertion by the layers'
annotate rules) and the float-vs-annotated comparison; the quantization schemes, TFLite's
requantization arithmetic and its reference kernels (through LiteRT). May import core.data and core.frontend."""
