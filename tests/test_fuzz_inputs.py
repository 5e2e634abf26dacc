"""Property-based fuzzing (hypothesis) of the two loaders that read untrusted files: the graph
importer (the import stage, on mutations of a real Keras CNN frozen as a GraphDef and of the
shipped QAT graph's bytes) and the IR loader (on mutations of an IR the pipeline emitted).
Property: every input is either imported / loaded, or refused with the loader's own error (a
ValueError whose message names the file): never another exception, never an allocation past the
memory budget."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from conftest import MBV1_GRAPH, compose, tracking_override
from core.ir.io import NET_DEF_FILE, PARAMS_DIR, read_ir
from core.ir.records import IrError
from pipeline.main import run_pipeline
from pipeline.runner import StageContext, stage_params
from pipeline.stages import stage_named

FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
BUDGET_MB = 64


def _cnn_graph_def():
    """A small real CNN (conv, BN, ReLU, pooling, dense, softmax), frozen as TensorFlow serves it."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, padding="same"), keras.layers.BatchNormalization(),
        keras.layers.ReLU(), keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(5),
        keras.layers.Softmax(),
    ])
    function = tf.function(lambda x: model(x, training=False)).get_concrete_function(tf.TensorSpec([None, 8, 8, 3], tf.float32))
    return convert_variables_to_constants_v2(function).graph.as_graph_def()


@pytest.fixture(scope="module")
def import_stage(tmp_path_factory):
    """The import stage as the runner calls it, on whatever bytes are at `model.pb`."""
    root = tmp_path_factory.mktemp("fuzz-import")
    model = root / "model.pb"
    cfg = compose("model=keras_cifar10", "model.format=frozen_graph", f"model.file.path={model}", f"data.path={root}",
                  f"limits.memory_mb={BUDGET_MB}", f"store.cache_dir={root / 'cache'}")
    stage = stage_named("import")
    context = StageContext("import", progress=lambda done, total: None, log=lambda message: None)

    def run(data: bytes) -> None:
        model.write_bytes(data)
        out = root / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        params, _ = stage_params(stage, cfg, root / "cache")
        from stages.import_model import run as import_run
        import_run(params, {}, out, context)

    return run, _cnn_graph_def()


def _imports_or_refuses(run, data: bytes) -> None:
    try:
        run(data)
    except ValueError as error:  # the loaders' errors (ModelImportError, GraphError, BudgetError...) are ValueErrors
        assert str(error).strip(), "an error with no message"


NODE_FIELDS = st.sampled_from(["op", "input", "shape", "dtype", "drop", "const_shape"])
ODD_INTS = st.one_of(st.integers(-3, 40), st.sampled_from([0, -1, 2**31 - 1, 2**40, 65536]))


@st.composite
def graph_mutations(draw):
    return draw(st.lists(st.tuples(st.integers(0, 10**6), NODE_FIELDS, st.lists(ODD_INTS, min_size=0, max_size=5),
                                   st.text(min_size=0, max_size=12)), min_size=1, max_size=4))


def _mutated(graph_def, mutations):
    from tensorflow.core.framework import tensor_shape_pb2

    mutated = tf.compat.v1.GraphDef()
    mutated.CopyFrom(graph_def)
    for which, field, numbers, text in mutations:
        if not len(mutated.node):
            break
        node = mutated.node[which % len(mutated.node)]
        dims = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in numbers])
        if field == "op":
            node.op = text or "Conv2D"
        elif field == "input":
            others = [other.name for other in mutated.node]
            node.input.append(text if not numbers else f"{others[numbers[0] % len(others)]}:{numbers[-1]}")
        elif field == "shape":
            node.attr["shape"].shape.CopyFrom(dims)
        elif field == "dtype":
            node.attr["dtype"].type = numbers[0] % 128 if numbers else 0
        elif field == "drop":
            del mutated.node[which % len(mutated.node)]
        elif field == "const_shape" and node.op == "Const":
            node.attr["value"].tensor.tensor_shape.CopyFrom(dims)
    return mutated


@FUZZ
@given(mutations=graph_mutations())
def test_the_importer_imports_or_refuses_every_mutated_graph(import_stage, mutations):
    run, graph_def = import_stage
    _imports_or_refuses(run, _mutated(graph_def, mutations).SerializeToString())


def test_the_unmutated_graph_imports(import_stage):
    run, graph_def = import_stage
    run(graph_def.SerializeToString())  # the fuzz's starting point is a graph the importer takes


@FUZZ
@given(flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=8),
       cut=st.one_of(st.none(), st.floats(0, 1)))
def test_the_importer_refuses_corrupted_bytes_of_the_real_qat_graph(import_stage, flips, cut):
    if not MBV1_GRAPH.exists():
        pytest.skip(f"needs ../shared: {MBV1_GRAPH} is missing")
    run, _ = import_stage
    data = bytearray(MBV1_GRAPH.read_bytes())
    for where, value in flips:
        data[int(where * len(data))] ^= value
    _imports_or_refuses(run, bytes(data[: int(cut * len(data))] if cut is not None else data))


# --- the IR loader ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def emitted_ir(tmp_path_factory) -> Path:
    """The IR the pipeline emits for the built-in digits model."""
    root = tmp_path_factory.mktemp("fuzz-ir")
    cfg = compose(f"store.url={root / 'store'}", tracking_override(root), "until=emit_ir",
                  "model.builtin.epochs=2")
    summary = run_pipeline(cfg, console=Console(file=io.StringIO()))
    return summary.results[-1].artifact.directory


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=True),
              st.text(max_size=8), st.sampled_from(["input", "endpoint", "conv", "../x", "", "\x00"])),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=6), children, max_size=3)),
    max_leaves=6,
)


@FUZZ
@given(layer=st.integers(0, 10**6), key=st.integers(0, 10**6), value=JSON_VALUES, delete=st.booleans(),
       npy=st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.sampled_from(["delete", "truncate", "float", "object", "flip"]))))
def test_the_ir_loader_loads_or_refuses_every_mutated_ir(emitted_ir, tmp_path_factory, layer, key, value, delete, npy):
    work = tmp_path_factory.mktemp("ir")
    shutil.copytree(emitted_ir, work / "ir")
    directory = work / "ir"
    layers = json.loads((directory / NET_DEF_FILE).read_text())
    target = layers[layer % len(layers)]
    name = sorted(target)[key % len(target)]
    if delete:
        del target[name]
    else:
        target[name] = value
    (directory / NET_DEF_FILE).write_text(json.dumps(layers))
    if npy is not None:
        files = sorted((directory / PARAMS_DIR).glob("*.npy"))
        victim, how = files[npy[0] % len(files)], npy[1]
        if how == "delete":
            victim.unlink()
        elif how == "truncate":
            victim.write_bytes(victim.read_bytes()[: len(victim.read_bytes()) // 2])
        elif how == "float":
            np.save(victim, np.load(victim).astype(np.float32))
        elif how == "object":
            np.save(victim, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        else:
            data = bytearray(victim.read_bytes())
            data[npy[0] % len(data)] ^= 0xFF
            victim.write_bytes(bytes(data))
    try:
        read_ir(directory)
    except IrError as error:
        assert str(directory) in str(error) or "layer" in str(error), str(error)


def test_a_missing_npy_in_an_ir_is_named(emitted_ir, tmp_path):
    shutil.copytree(emitted_ir, tmp_path / "ir")
    weight = next((tmp_path / "ir" / PARAMS_DIR).glob("*_weight.npy"))
    weight.unlink()
    with pytest.raises(IrError, match=f"{weight}: layer .* needs this file and it is missing"):
        read_ir(tmp_path / "ir")
