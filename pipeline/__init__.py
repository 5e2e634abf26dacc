"""Orchestration: config schema, stage table, runner, store, tracking, sweeps, DVC entry, the console."""

import logging
import os

# TensorFlow's C++ start-up notices (CPU features, oneDNN) would bury the stage
# progress lines; warnings and errors still show. A user's own setting wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# MLflow's INFO lines ("Creating initial MLflow database tables...") likewise; its warnings show.
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")

# Stages and the runner log through `logging` (Hydra writes each job's log to its run.log); where no
# one configured logging (python -m pipeline.dvc_stage), the console already shows the same lines.
logging.getLogger("pipeline").addHandler(logging.NullHandler())
