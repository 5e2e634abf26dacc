"""Shell completion of a typed config value: Hydra completes `key=` with the value the key holds
(`calib.method=CalibMethod.minmax`); for an Enum or bool field of the schema (pipeline/config.py)
this answers with every choice instead (`calib.method=` -> minmax, percentile, mse, kl, qat, auto).
run.py asks it first when the shell's completion script queries (`-sc query=bash|zsh`); anything
else (keys, config groups, files) is Hydra's own completion."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import io
import os
import re
import shlex
import sys
import types
import typing
from typing import Any

from hydra._internal.core_plugins.bash_completion import BashCompletion
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
    """If this process is a shell's completion request that this module answers, print the answer; whether it did.
    It installs bash's script (`-sc install=bash`) and completes typed values; other queries go on to Hydra,
    with the interpreter in COMP_LINE made plain `python` for its parser."""
    if not any(flag in argv for flag in ("-sc", "--shell-completion")):
        return False
    if "install=bash" in argv:
        print(bash_install_script(sys.executable), end="")
        return True
    if not any(arg in QUERY_SHELLS for arg in argv):
        return False
    line = plain_python_line(os.environ.get("COMP_LINE", ""))
    shift = len(os.environ.get("COMP_LINE", "")) - len(line)
    os.environ["COMP_LINE"] = line
    if os.environ.get("COMP_POINT", "").isdigit():
        os.environ["COMP_POINT"] = str(max(0, int(os.environ["COMP_POINT"]) - shift))
    answer = complete(CompletionPlugin.strip_python_or_app_name(line))
    if answer is None:
        return False
    print(" ".join(answer))
    return True


PYTHON_WORD = re.compile(r"^\s*(\S*/)?python[0-9.]*(?=\s)")


def plain_python_line(line: str) -> str:
    """The command line with its interpreter as plain `python` (`.venv/bin/python run.py k=` -> `python run.py k=`):
    Hydra's parser of a completion query knows only a bare `python`, so a venv's would be taken for an app name."""
    return PYTHON_WORD.sub("python", line, count=1)


def bash_install_script(interpreter: str) -> str:
    """Hydra's bash completion script, for `python run.py`, `.venv/bin/python run.py` and this interpreter's
    full path alike (Hydra's registers the bare word `python` only, so the README's `.venv/bin/python run.py`
    completed nothing)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        BashCompletion(config_loader=None).install()
    script, _, _ = buffer.getvalue().rstrip().rpartition(" ")  # its last word: the one command it registers
    script = script.replace('if [ "${words[0]}" == "python" ]; then', 'if [[ "${words[0]##*/}" =~ ^python[0-9.]*$ ]]; then')
    commands = dict.fromkeys(["python", "python3", ".venv/bin/python", interpreter])
    return script + " " + " ".join(shlex.quote(command) for command in commands) + "\n"
