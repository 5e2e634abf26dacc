"""The host C backend: the emitter registry (emitter.py) with one module per IR operation
(ops/), the pieces of a C program (program.py: symbols, arrays, arena, text), the C runtime
headers (runtime/) and building and running a program (build.py). May import core.ir and below."""
