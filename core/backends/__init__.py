"""From the IR to programs. c/ (host C: per-operation emitters, runtime, build and run),
accel/ (the accelerator: target, ISA, cost model, lowerings, partition) and tflite/ (the
tflite_int8 scheme's network as a TensorFlow Lite int8 file) are siblings that do not import
each other; program.py, above them, generates the one program that runs a
partitioned IR, and capability.py, beside it, says what each target takes (derived from their registries). May import
core.ir and everything below it."""
