"""Keras 2 model files under Keras 3. Many trained `.h5` files users have (MLCommons' MLPerf Tiny models among them)
were saved by Keras 2, whose layer configs hold keywords Keras 3's layers refuse: Keras 2's convolutions share one
config with `groups`, which Keras 3's depthwise, separable and transposed convolutions do not take. Each such known
keyword is dropped where its value asks for nothing Keras 3 does not do without it (`groups=1`), by a layer class
that reads the config first (`custom_objects`); any other value, or any other keyword Keras 3 refuses, is an error
naming the layer, its class and the keyword."""

from __future__ import annotations

import re
from typing import Any

# Keras 2 layer class -> {keyword: the value that means what the Keras 3 layer does without it}
KERAS2_KEYWORDS: dict[str, dict[str, Any]] = {
    name: {"groups": 1}
    for name in ("DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D", "Conv1DTranspose", "Conv2DTranspose",
                 "Conv3DTranspose")
}

_DESERIALIZING = re.compile(r"deserializing class '(?P<cls>[A-Za-z0-9_]+)' using config=\{'name': '(?P<layer>[^']*)'")
_UNRECOGNIZED = re.compile(r"Unrecognized keyword arguments? passed to (?P<cls>[A-Za-z0-9_]+): (?P<keywords>\{.*?\})")


class Keras2KeywordError(ValueError):
    """A Keras 2 layer config with a keyword Keras 3 cannot take as it is."""


def keras3_config(class_name: str, config: dict) -> dict:
    """`config` without the Keras 2 keywords its class is known to carry harmlessly; a Keras2KeywordError for a value
    that would ask for something."""
    config = dict(config)
    for keyword, harmless in KERAS2_KEYWORDS.get(class_name, {}).items():
        if keyword in config:
            value = config.pop(keyword)
            if value != harmless:
                raise Keras2KeywordError(f"layer {config.get('name')!r} ({class_name}): keyword {keyword}={value!r} from Keras 2, which "
                                         f"Keras 3's {class_name} does not take (only {keyword}={harmless!r} can be dropped); "
                                         "rebuild the layer without it and copy its weights")
    return config


def compatible_layers(layers_module) -> dict[str, type]:
    """custom_objects for keras.models.load_model: each class of KERAS2_KEYWORDS under its own name, reading a Keras 2
    config first (keras3_config)."""
    objects = {}
    for name in KERAS2_KEYWORDS:
        base = getattr(layers_module, name, None)
        if base is not None:
            objects[name] = _reading_keras2_configs(base)
    return objects


def _reading_keras2_configs(base: type) -> type:
    class Keras2Compatible(base):
        @classmethod
        def from_config(cls, config):
            return super().from_config(keras3_config(base.__name__, config))

    Keras2Compatible.__name__ = Keras2Compatible.__qualname__ = base.__name__
    return Keras2Compatible


def keyword_refusal(error: BaseException) -> str | None:
    """Keras 3's refusal of a layer config's keyword, worded as the layer, its class and the keyword; None if `error`
    is not one."""
    text = str(error)
    unrecognized = _UNRECOGNIZED.search(text)
    if unrecognized is None:
        return str(error) if isinstance(error, Keras2KeywordError) else None
    layer = _DESERIALIZING.search(text)
    name = f"layer {layer.group('layer')!r} ({unrecognized.group('cls')})" if layer else f"a {unrecognized.group('cls')} layer"
    return (f"{name}: keyword(s) {unrecognized.group('keywords')} that Keras 3's {unrecognized.group('cls')} does not take (a Keras 2 "
            "file's config); rebuild the layer without them in Keras 3, copy its weights and save the model again")
