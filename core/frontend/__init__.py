"""The TensorFlow side: the project's Graph (and its GraphDef round trip), model import
(frozen GraphDef, SavedModel, .keras, .tflite read as the graph it computes, built-in models), constant and BatchNorm folding,
FakeQuant op names and the float graph a QAT graph contains, graph execution, and the
machinery that groups a graph into layers by patterns. May import core.data only."""
