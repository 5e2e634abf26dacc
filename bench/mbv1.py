"""What the benchmarks share: the real mbv1_cifar10 model and CIFAR-10 images from ../shared."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"

import pipeline  # noqa: E402,F401  (quiet TensorFlow)
from core.data.datasets import load_split  # noqa: E402
from core.frontend.constant_folding import fold_constants  # noqa: E402
from core.frontend.folding import fold_batch_norms  # noqa: E402
from core.frontend.graph import Graph  # noqa: E402
from core.frontend.importer import import_graph, load_graph_def  # noqa: E402
from core.frontend.fake_quant import QuantRange, bypass_fake_quant  # noqa: E402

MBV1 = SHARED / "models" / "mobilenet_v1_0.5_128_cifar10" / "graph.pb"
END_POINT = "MobilenetV1/Dense/act_quant/FakeQuantWithMinMaxVars:0"
PREPROCESS = {"size": [128, 128], "channels": 3, "resize": "tf_bilinear", "scale": 127.5, "offset": -1.0}


def qat_graph() -> Graph:
    """The QAT frozen graph as imported (FakeQuant in place)."""
    loaded = load_graph_def("frozen_graph", MBV1)
    return import_graph(loaded.graph_def, "images:0", [END_POINT], origin=str(MBV1), source={})


def float_graph(qat: Graph | None = None) -> tuple[Graph, dict[str, QuantRange]]:
    """The folded float graph it contains, and its FakeQuant ranges."""
    return bypass_fake_quant(fold_batch_norms(fold_constants(qat or qat_graph())).graph)


def cifar_images(split: str, count: int):
    return load_split("cifar10", SHARED / "data" / "cifar-10-batches-py", split, PREPROCESS, limit=count).images
