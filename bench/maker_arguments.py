"""The command line of the scripts that build, train and write the models other tools' files come from
(bench/torch_models.py in the torch environment, bench/keras_hub_models.py in the project's): plain argparse, importable
from either environment."""

from __future__ import annotations

import argparse
from pathlib import Path


def maker_arguments(description: str, models: list[str]) -> argparse.Namespace:
    """--out (made), --models, --images, --train, --epochs, parsed."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default=",".join(models))
    parser.add_argument("--images", type=Path, required=True, help="an .npz of CIFAR-10 images [N, 3, 32, 32] in [0, 1] and labels")
    parser.add_argument("--train", type=int, default=932, help="training samples (CIFAR-10's: its training batch in ../shared)")
    parser.add_argument("--epochs", type=int, default=4)
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    return arguments
