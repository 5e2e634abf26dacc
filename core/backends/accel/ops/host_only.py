"""The IR operations that never run on the accelerator, and why (partition keeps them on the host)."""

from core.backends.accel.lowering import host_only

host_only("reshape", "a change of shape across the blocked layout is a host copy (seed 004 [0055])")
host_only("concat2", "the accelerator has no concatenation")
host_only("resize_bilinear", "the accelerator has no interpolation")
