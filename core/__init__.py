"""The toolchain's core: a TensorFlow model in, an int8 IR and the programs that run it out.

Packages, in the order data flows and imports may point (each imports only those above it):

  limits             the memory budget declared sizes are checked against before allocating
  data               data sets and image preprocessing
  frontend           the TensorFlow graph: import, constant and BatchNorm folding, built-in
                     models, FakeQuant names, grouping into layers (the machinery)
  quantize           calibration statistics, threshold methods and the calibration table,
                     simulated-quantization annotation, float vs annotated evaluation
  ir                 the TF2IR IR: typed layer records, one folder per operation (pattern,
                     annotate rule, record, fields, kernel), fixed point, emission, I/O, the
                     integer simulator
  backends.c         host C: an emitter per operation, the C runtime, building and running
  backends.accel     the accelerator: target description, ISA, cost model, per-operation
                     lowerings, partition
  backends.program   the two-level program generator (all-host is its plain-C case)
  reports            pictures (imports anything above, imported by stages only)

tests/test_structure.py enforces the order, the absence of cycles, and the registries' coverage.
"""
