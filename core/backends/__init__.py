"""From the IR to programs. c/ (host C: per-operation emitters, runtime, build and run) and
accel/ (the accelerator: target, ISA, cost model, lowerings, partition) are siblings that do
not import each other; program.py, above both, generates the one program that runs a
partitioned IR. May import core.ir and everything below it."""
