"""Pictures for people: per-layer charts, clipping histograms, the partition, the accelerator's
cycles; warnings summarized for the console (`warnings.py`). Each function draws on a bare matplotlib Figure with the Agg canvas (no display, no
pyplot state) and writes a PNG. The top of core: it may import any core package, and none
imports it."""
