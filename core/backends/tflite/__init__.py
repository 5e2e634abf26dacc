"""The tflite_int8 scheme's network as a TensorFlow Lite int8 flatbuffer (export.py): the project's
quantization of a model, in the format TFLite's kernels (and every runtime that reads .tflite) run. One
writer per IR operation (ops.py, a registry with a test that every operation is covered or declared not
yet written). Siblings c/ and accel/ are not imported. May import core.ir and everything below it."""
