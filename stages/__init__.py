"""The eight pipeline stages, one module each: a stage takes its config and input artifacts and
returns its output files and metrics (pipeline/stages.py declares them to the runner and DVC); evaluation.py is the
evaluation split as the stages that read it load it."""
