"""core.frontend.importer against real TensorFlow: the two shared QAT graphs, small graphs built here, Keras/SavedModel files."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from core.frontend.graph import GraphError
from core.frontend.importer import LoadedModel, ModelImportError, import_graph, load_graph_def
from stages.import_model import expressible_layers

SHARED = Path(__file__).resolve().parents[2] / "shared"
MOBILENET = SHARED / "models" / "mobilenet_v1_0.5_128_cifar10" / "graph.pb"
MOBILENET_INPUT = "images:0"
MOBILENET_END_POINTS = ["MobilenetV1/Dense/act_quant/FakeQuantWithMinMaxVars:0"]
SSD = SHARED / "models" / "mobilenet_v2_ssd_0.25_160" / "graph.pb"
SSD_INPUT = "normalized_input_image_tensor:0"
SSD_END_POINTS = [f"BoxPredictor_{k}/Reshape{suffix}:0" for k in range(6) for suffix in ("", "_1")]

needs_shared_models = pytest.mark.skipif(
    not (MOBILENET.is_file() and SSD.is_file()), reason=f"shared test models not found under {SHARED / 'models'}"
)


# --- helpers -------------------------------------------------------------------
def run_graph_def(graph_def, input_tensor: str, outputs: list[str], x: np.ndarray) -> list[np.ndarray]:
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        return session.run(outputs, {input_tensor: x})


def tiny_graph_def(build, shape=(None, 4, 4, 2)):
    """A TF1 graph with one float Placeholder 'images'; `build(images)` adds the rest."""
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape, name="images")
        build(images)
    return graph.as_graph_def()


def import_tiny(graph_def, input_tensor="images:0", end_points=("out:0",)):
    return import_graph(graph_def, input_tensor, list(end_points), origin="builtin:tiny", source={"format": "test"})


def random_input(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape).astype(np.float32)


# --- the shared QAT graphs -----------------------------------------------------
@pytest.fixture(scope="module")
def mobilenet():
    loaded = load_graph_def("frozen_graph", MOBILENET)
    graph = import_graph(
        loaded.graph_def, MOBILENET_INPUT, MOBILENET_END_POINTS, origin=str(MOBILENET), source={"format": "frozen_graph"}
    )
    return loaded, graph


@pytest.fixture(scope="module")
def ssd():
    loaded = load_graph_def("frozen_graph", SSD)
    graph = import_graph(loaded.graph_def, SSD_INPUT, SSD_END_POINTS, origin=str(SSD), source={"format": "frozen_graph"})
    return loaded, graph


@needs_shared_models
def test_frozen_graph_offers_its_one_placeholder_and_its_unread_outputs(mobilenet):
    loaded, _ = mobilenet
    assert isinstance(loaded, LoadedModel)
    assert loaded.default_input_tensor == "images:0" and loaded.default_end_points == ["MobilenetV1/Squeeze:0"]
    assert len(loaded.graph_def.node) == 1014


@needs_shared_models
def test_mobilenet_imports_pruned_without_identities(mobilenet):
    _, graph = mobilenet
    counts = graph.op_counts()
    assert graph.input_tensor == MOBILENET_INPUT
    assert graph.end_points == MOBILENET_END_POINTS
    assert "Identity" not in counts
    assert "Squeeze" not in counts  # it follows the end point
    assert counts["Conv2D"] == 15 and counts["DepthwiseConv2dNative"] == 13
    assert counts["Placeholder"] == 1
    assert len(expressible_layers(graph, "test", None).layers) == 15 + 13 + 1  # the convs, the depthwise convs, the pool
    assert graph.source == {"format": "frozen_graph"}  # no alias: the end point is not an Identity
    assert graph.shape(MOBILENET_INPUT) == [-1, 128, 128, 3]
    assert graph.shape(MOBILENET_END_POINTS[0]) == [-1, 1, 1, 10]


@needs_shared_models
def test_ssd_imports_pruned_without_identities(ssd):
    _, graph = ssd
    counts = graph.op_counts()
    assert graph.input_tensor == SSD_INPUT
    assert graph.end_points == SSD_END_POINTS
    assert counts["Conv2D"] == 55 and counts["DepthwiseConv2dNative"] == 17
    assert counts["Placeholder"] == 1
    for gone in ("Identity", "Sigmoid", "ConcatV2", "Squeeze", "RealDiv"):
        assert gone not in counts, gone
    assert len(graph.nodes) < 2712
    names = {node.name for node in graph.nodes}
    for node in graph.nodes:  # every edge points at a kept node
        assert all(tensor.split(":")[0] in names for tensor in node.inputs), node.name
    assert graph.shape(SSD_INPUT) == [1, 160, 160, 3]
    assert all(graph.shape(tensor) is not None for tensor in SSD_END_POINTS)


@needs_shared_models
@pytest.mark.parametrize(
    "which, input_tensor, end_points, shape",
    [
        ("mobilenet", MOBILENET_INPUT, MOBILENET_END_POINTS, (2, 128, 128, 3)),
        ("ssd", SSD_INPUT, SSD_END_POINTS, (1, 160, 160, 3)),
    ],
)
def test_imported_graph_computes_what_the_file_computes(request, which, input_tensor, end_points, shape):
    loaded, graph = request.getfixturevalue(which)
    x = random_input(shape)
    expected = run_graph_def(loaded.graph_def, input_tensor, end_points, x)
    actual = run_graph_def(graph.to_graph_def(), graph.input_tensor, graph.end_points, x)
    for want, got in zip(expected, actual):
        np.testing.assert_array_equal(got, want)


@needs_shared_models
def test_ssd_import_is_fast():
    graph_def = load_graph_def("frozen_graph", SSD).graph_def
    started = time.perf_counter()
    import_graph(graph_def, SSD_INPUT, SSD_END_POINTS, origin=str(SSD), source={})
    assert time.perf_counter() - started < 5.0


@needs_shared_models
def test_missing_end_point_in_real_graph_suggests_near_names(ssd):
    loaded, _ = ssd
    with pytest.raises(ModelImportError) as caught:
        import_graph(loaded.graph_def, SSD_INPUT, ["BoxPredictor_0/Reshap:0"], origin=str(SSD), source={})
    message = str(caught.value)
    assert str(SSD) in message and "model.end_points" in message
    assert "BoxPredictor_0/Reshape" in message


# --- load_graph_def errors -----------------------------------------------------
@pytest.mark.parametrize("fmt, name", [("frozen_graph", "graph.pb"), ("saved_model", "saved"), ("keras", "model.keras")])
def test_missing_file(tmp_path, fmt, name):
    path = tmp_path / name
    with pytest.raises(ModelImportError, match="no such file") as caught:
        load_graph_def(fmt, path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    "content",
    [
        np.random.default_rng(0).bytes(4096),
        b"this is a text file, not a GraphDef\n",
        b"",
        b"\x08\x01",  # parses as an unknown field: protobuf alone would accept it
    ],
    ids=["random-bytes", "text", "empty", "unknown-field"],
)
def test_garbage_is_not_a_graph(tmp_path, content):
    path = tmp_path / "graph.pb"
    path.write_bytes(content)
    with pytest.raises(ModelImportError, match="not a graph") as caught:
        load_graph_def("frozen_graph", path)
    assert str(path) in str(caught.value)
    assert "GraphDef" in str(caught.value)


def test_unknown_format(tmp_path):
    with pytest.raises(ModelImportError, match="frozen_graph, saved_model, keras"):
        load_graph_def("onnx", tmp_path / "model.onnx")


def test_saved_model_dir_without_saved_model_pb(tmp_path):
    directory = tmp_path / "export"
    directory.mkdir()
    (directory / "variables").mkdir()
    with pytest.raises(ModelImportError, match="no saved_model.pb") as caught:
        load_graph_def("saved_model", directory)
    assert str(directory) in str(caught.value)


def test_keras_file_that_does_not_load(tmp_path):
    path = tmp_path / "model.keras"
    path.write_bytes(b"not a zip archive")
    with pytest.raises(ModelImportError, match="does not load") as caught:
        load_graph_def("keras", path)
    assert str(path) in str(caught.value)


def test_model_import_error_is_a_graph_error():
    assert issubclass(ModelImportError, GraphError)


# --- import_graph on small graphs ----------------------------------------------
def _relu_chain(images):
    hidden = tf.identity(tf.nn.relu(images, name="relu"), name="relu_id")
    tf.identity(tf.identity(tf.multiply(hidden, 2.0, name="scale"), name="scale_id"), name="out")
    tf.nn.relu6(hidden, name="unused_branch")


def test_identities_are_skipped_and_end_point_aliases_recorded():
    graph = import_tiny(tiny_graph_def(_relu_chain))
    assert graph.end_points == ["scale:0"]
    assert graph.source == {"format": "test", "end_point_aliases": {"out:0": "scale:0"}}
    assert [node.op for node in graph.nodes if node.op in ("Identity", "Relu6")] == []
    assert graph.node("scale").inputs[0] == "relu"  # rewired past relu_id


def test_tensor_and_node_names_are_both_accepted():
    graph_def = tiny_graph_def(_relu_chain)
    by_tensor = import_tiny(graph_def, "images:0", ["out:0"])
    by_node = import_tiny(graph_def, "images", ["out"])
    assert by_node.input_tensor == "images:0"
    assert by_node.end_points == by_tensor.end_points == ["scale:0"]
    assert by_node.source["end_point_aliases"] == {"out:0": "scale:0"}


def test_control_edges_do_not_keep_nodes_alive():
    def build(images):
        side = tf.nn.relu6(images, name="side")
        with tf.control_dependencies([side]):
            tf.nn.relu(images, name="out")

    graph = import_tiny(tiny_graph_def(build))
    assert [node.name for node in graph.nodes] == ["images", "out"]


def test_missing_input_tensor_suggests_near_names():
    with pytest.raises(ModelImportError) as caught:
        import_tiny(tiny_graph_def(_relu_chain), input_tensor="image:0")
    message = str(caught.value)
    assert "builtin:tiny" in message and "'image:0'" in message
    assert "images" in message and "model.input_tensor" in message


def test_input_tensor_that_is_not_a_placeholder():
    with pytest.raises(ModelImportError, match="Placeholder") as caught:
        import_tiny(tiny_graph_def(_relu_chain), input_tensor="relu:0")
    assert "model.input_tensor" in str(caught.value)


def test_missing_end_point():
    with pytest.raises(ModelImportError) as caught:
        import_tiny(tiny_graph_def(_relu_chain), end_points=["scale:0", "outt:0"])
    message = str(caught.value)
    assert "'outt:0'" in message and "out" in message and "model.end_points" in message
    assert "'scale:0'" not in message


@pytest.mark.parametrize("end_point", ["scale:3", "out:1"])
def test_end_point_output_index_out_of_range(end_point):
    with pytest.raises(ModelImportError, match="model.end_points"):
        import_tiny(tiny_graph_def(_relu_chain), end_points=[end_point])


def test_end_points_that_ignore_the_input():
    def build(images):
        tf.constant(1.0, name="out")

    with pytest.raises(ModelImportError, match="do not depend on the input"):
        import_tiny(tiny_graph_def(build))


def test_a_node_no_layer_holds_is_refused_at_import_naming_it_and_where_to_cut():
    def build(images):
        hidden = tf.nn.relu(images, name="features/relu")
        normalized = tf.nn.local_response_normalization(hidden, name="head/lrn")
        tf.nn.max_pool2d(normalized, 1, 1, "VALID", name="out")

    graph_def = tiny_graph_def(build)
    graph = import_tiny(graph_def)
    with pytest.raises(ModelImportError) as caught:
        expressible_layers(graph, "builtin:tiny", None)
    message = str(caught.value)
    assert message.startswith("builtin:tiny: node head/lrn (LRN) (name scope 'head') cannot be expressed in the IR")
    assert "model.end_points=[features/relu:0]" in message
    # cutting the graph before it, as the message says, imports
    assert len(expressible_layers(import_tiny(graph_def, end_points=["features/relu:0"]), "t", None).layers) == 1


def test_an_add_that_broadcasts_is_refused_at_import_with_its_shapes():
    def build(images):
        pooled = tf.nn.max_pool2d(images, 1, 1, "VALID", name="features")
        gate = tf.reduce_mean(pooled, [1, 2], keepdims=True, name="gate")
        tf.add(pooled, gate, name="out")

    with pytest.raises(ModelImportError, match=r"(?s)node out \(AddV2\).*an add of a \[4, 4, 2\] and a \[1, 1, 2\] tensor.*"
                                               r"model.end_points=\[features:0, gate:0\]"):
        expressible_layers(import_tiny(tiny_graph_def(build, shape=(1, 4, 4, 2))), "builtin:tiny", None)


def test_a_node_reading_the_input_says_nothing_before_it_converts():
    graph = import_tiny(tiny_graph_def(lambda images: tf.nn.local_response_normalization(images, name="out")))
    with pytest.raises(ModelImportError, match="reads the network input directly"):
        expressible_layers(graph, "builtin:tiny", None)


def test_second_placeholder_is_named():
    def build(images):
        mask = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 2], name="mask")
        tf.multiply(images, mask, name="out")

    with pytest.raises(ModelImportError, match="mask"):
        import_tiny(tiny_graph_def(build))


def test_unused_second_placeholder_is_pruned():
    def build(images):
        tf.compat.v1.placeholder(tf.float32, [None], name="is_training")
        tf.nn.relu(images, name="out")

    graph = import_tiny(tiny_graph_def(build))
    assert [node.name for node in graph.nodes] == ["images", "out"]


def test_empty_graph():
    with pytest.raises(ModelImportError, match="empty") as caught:
        import_graph(tf.compat.v1.GraphDef(), "images:0", ["out:0"], origin="builtin:digits", source={})
    assert "builtin:digits" in str(caught.value)


def test_no_end_points():
    with pytest.raises(ModelImportError, match="model.end_points"):
        import_tiny(tiny_graph_def(_relu_chain), end_points=[])


# --- Keras and SavedModel files ------------------------------------------------
KERAS_SHAPE = (8, 8, 3)


@pytest.fixture(scope="module")
def keras_model():

    keras.utils.set_random_seed(0)
    images = keras.Input(KERAS_SHAPE, name="pixels")
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(images)
    y = keras.layers.DepthwiseConv2D(3, padding="same")(x)
    y = keras.layers.BatchNormalization()(y)
    y = keras.layers.ReLU(6.0)(y)
    y = keras.layers.Add()([x, y])
    y = keras.layers.MaxPooling2D(2)(y)
    y = keras.layers.Flatten()(y)
    model = keras.Model(images, y)
    rng = np.random.default_rng(1)
    # non-trivial batch-norm statistics, so freezing them matters
    batch_norm = next(layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization))
    batch_norm.set_weights([rng.uniform(0.5, 2.0, 4), rng.normal(size=4), rng.normal(size=4), rng.uniform(0.5, 2.0, 4)])
    return model


def _check_matches_keras(graph, model, input_tensor):
    x = random_input((3, *KERAS_SHAPE), seed=2)
    (got,) = run_graph_def(graph.to_graph_def(), input_tensor, graph.end_points, x)
    np.testing.assert_allclose(got, model(x, training=False).numpy(), rtol=1e-5, atol=1e-5)
    assert "Identity" not in graph.op_counts()
    assert expressible_layers(graph, "test", None).layers


def test_keras_file_imports(tmp_path, keras_model):
    path = tmp_path / "model.keras"
    keras_model.save(path)
    loaded = load_graph_def("keras", path)
    # the frozen function's input Placeholder takes the Keras input's name; its output is an Identity
    assert loaded.default_input_tensor == "pixels:0"
    assert loaded.default_end_points == ["Identity:0"]
    graph = import_graph(
        loaded.graph_def, loaded.default_input_tensor, loaded.default_end_points, origin=str(path), source={"format": "keras"}
    )
    assert graph.shape("pixels:0") == [-1, *KERAS_SHAPE]
    assert graph.end_points[0] != "Identity:0"
    assert graph.source["end_point_aliases"] == {"Identity:0": graph.end_points[0]}
    _check_matches_keras(graph, keras_model, "pixels:0")


def _save_module(model, directory: Path) -> None:
    class Serving(tf.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        @tf.function(input_signature=[tf.TensorSpec([None, *KERAS_SHAPE], tf.float32, name="images")])
        def serve(self, images):
            return {"scores": self.model(images, training=False)}

    module = Serving(model)
    tf.saved_model.save(module, str(directory), signatures={"serving_default": module.serve})


def _export_keras(model, directory: Path) -> None:
    model.export(str(directory), verbose=False)


@pytest.mark.parametrize(
    "save, input_name", [(_save_module, "images"), (_export_keras, "pixels")], ids=["tf.saved_model.save", "keras.export"]
)
def test_saved_model_imports(tmp_path, keras_model, save, input_name):
    directory = tmp_path / "saved"
    save(keras_model, directory)
    loaded = load_graph_def("saved_model", directory)
    assert loaded.default_input_tensor == f"{input_name}:0"
    assert loaded.default_end_points == ["Identity:0"]
    graph = import_graph(
        loaded.graph_def, loaded.default_input_tensor, loaded.default_end_points, origin=str(directory), source={}
    )
    _check_matches_keras(graph, keras_model, loaded.default_input_tensor)


@pytest.mark.parametrize("fmt", ["keras", "saved_model"])
def test_a_keras_layer_no_ir_op_holds_is_named_by_its_keras_name(tmp_path, fmt):
    images = keras.Input((4, 4, 2), name="features")
    hidden = keras.layers.Conv2D(3, 1, name="stem")(images)
    model = keras.Model(images, keras.layers.UnitNormalization(name="the_norm")(hidden))
    path = tmp_path / ("model.keras" if fmt == "keras" else "saved")
    model.save(path) if fmt == "keras" else model.export(str(path))
    loaded = load_graph_def(fmt, path)
    graph = import_graph(loaded.graph_def, loaded.default_input_tensor, loaded.default_end_points, origin=str(path), source={})
    with pytest.raises(ModelImportError) as caught:
        expressible_layers(graph, str(path), loaded.layer_names)
    message = str(caught.value)
    assert "StatefulPartitionedCall" not in message
    # a .keras file names its layers and their classes, and the refusal lists the Keras layers the importer takes;
    # a SavedModel keeps only the name scope Keras gave the ops
    if fmt == "keras":
        assert message.startswith(f"{path}: Keras layer 'the_norm' (UnitNormalization) cannot be expressed in the IR; the importer "
                                  "takes the Keras layers Conv2D, DepthwiseConv2D") and "ZeroPadding2D" in message
    else:
        assert message.startswith(f"{path}: node ") and "/the_norm_1/Sum (Sum)" in message
    cut = message.split("model.end_points=[")[1].split("]")[0]
    # the suggested end point is what the refused Sum reads, the square of the conv's output: the network up to it imports
    assert [layer.op for layer in expressible_layers(import_graph(loaded.graph_def, loaded.default_input_tensor, [cut], origin="t", source={}),
                                                     "t", None).layers] == ["conv", "lut"]


def test_frozen_graph_given_a_saved_model_dir_hints_the_format(tmp_path, keras_model):
    directory = tmp_path / "saved"
    _save_module(keras_model, directory)
    with pytest.raises(ModelImportError, match="saved_model"):
        load_graph_def("frozen_graph", directory)


@pytest.mark.skipif(importlib.util.find_spec("keras_hub") is not None, reason="keras_hub is installed here (PYTHONPATH)")
def test_a_keras_file_of_a_package_not_installed_is_refused_naming_it_and_the_saved_model_route(tmp_path):
    """A keras-hub model's .keras names its classes' modules (`keras_hub.src.models...`): without keras_hub the refusal
    says which package and modules, how to install it, and the SavedModel route, not Keras' "could not be deserialized"."""
    import json
    import zipfile

    inputs = keras.Input((8, 8, 3))
    keras.Model(inputs, keras.layers.Conv2D(4, 3, name="stem")(inputs)).save(saved := tmp_path / "saved.keras")
    path = tmp_path / "backbone.keras"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(path, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                layer = next(layer for layer in config["config"]["layers"] if layer["name"] == "stem")
                layer["module"], layer["class_name"] = "keras_hub.src.models.mobilenet.mobilenet_backbone", "MobileNetBackbone"
                data = json.dumps(config).encode()
            target.writestr(item, data)
    with pytest.raises(ModelImportError) as refusal:
        load_graph_def("keras", path)
    message = str(refusal.value)
    assert "not installed: keras_hub (keras_hub.src.models.mobilenet.mobilenet_backbone)" in message, message
    assert "`make setup-keras-hub`, then run with PYTHONPATH=.venv/keras_hub" in message and "model.format=saved_model" in message, message
