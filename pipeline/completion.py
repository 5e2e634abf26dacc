"""Shell completion of a typed config value: Hydra completes `key=` with the value the key holds
(`calib.method=CalibMethod.minmax`); for an Enum or bool field of the schema (pipeline/config.py)
this answers with every choice instead (`calib.method=` -> minmax, percentile, mse, kl, qat, auto).
run.py asks it first when the shell's completion script queries (`-sc query=bash|zsh`); anything
else (keys, config groups, files) is Hydra's own completion."""

from __future__ import annotations

import dataclasses
import enum
import os
import types
import typing
from typing import Any

from hydra.plugins.completion_plugin import CompletionPlugin

from pipeline.config import Config

QUERY_SHELLS = ("query=bash", "query=zsh")  # both read the command line from COMP_LINE


def field_choices(dotted: str, schema: Any = Config) -> list[str] | None:
    """The values a config key can take when they are a closed set (Enum, bool), else None."""
    for part in dotted.split("."):
        if not dataclasses.is_dataclass(schema):
            return None
        hints = typing.get_type_hints(schema)
        if part not in hints:
            return None
        schema = _unwrap_optional(hints[part])
    if isinstance(schema, type) and issubclass(schema, enum.Enum):
        return [member.value for member in schema]
    if schema is bool:
        return ["true", "false"]
    return None


def _unwrap_optional(hint: Any) -> Any:
    """`X | None` and `Optional[X]` as X."""
    arguments = [argument for argument in typing.get_args(hint) if argument is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(arguments) == 1:
        return arguments[0]
    return hint


def complete(line: str) -> list[str] | None:
    """Completions of the command line's last word when it is `key=<partial value>` of a closed set;
    in a sweep value (`calib.method=minmax,k`) the part after the last comma is completed."""
    if not line or line.endswith(" "):
        return None
    word = line.split()[-1]
    if "=" not in word:
        return None
    key, value = word.split("=", 1)
    choices = field_choices(key.lstrip("+~"))
    if choices is None:
        return None
    done, _, partial = value.rpartition(",")
    head = f"{key}={done}," if done else f"{key}="
    return [head + choice for choice in choices if choice.startswith(partial)]


def answer_query(argv: list[str]) -> bool:
    """If this process is a shell's completion query that `complete` can answer, print the answer; whether it did."""
    if not any(flag in argv for flag in ("-sc", "--shell-completion")) or not any(arg in QUERY_SHELLS for arg in argv):
        return False
    answer = complete(CompletionPlugin.strip_python_or_app_name(os.environ.get("COMP_LINE", "")))
    if answer is None:
        return False
    print(" ".join(answer))
    return True
