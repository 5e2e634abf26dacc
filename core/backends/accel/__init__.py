"""The accelerator backend: the target description and its schema (target.py), the instruction set with its one
encoding table (isa.py), the weight compression its DMA decodes (compression.py), the cost model with the target's
memories and host (cost.py), the lowering state and registry (lowering.py) with one module per lowered IR operation or
host-only declaration (ops/), the partition of an IR between accelerator and host (partition.py), and the reference ISA
simulator in C (runtime/). May import core.ir and below, not core.backends.c."""
