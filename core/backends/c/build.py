"""Building and running a generated program: the system C compiler, the network binary on
raw int8 images, and the first layer whose output differs from the simulator's."""

from __future__ import annotations

import ctypes
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.backends.c.emitter import CodegenError
from core.backends.c.program import CProgram, image_shape
from core.ir.network import Ir

BINARY_FILE = "network"
DEFAULT_CFLAGS = ("-O2",)  # a program for any x86-64 (SIMD through QT_SIMD's clones); codegen.cflags replaces it
# what every build adds: the language, no warnings, and float layers without fused multiply-add
FIXED_CFLAGS = ("-std=c99", "-Wall", "-Werror", "-ffp-contract=off")
CC_COMMAND = ("cc", *DEFAULT_CFLAGS, *FIXED_CFLAGS)
INT8_SIMD_PATHS = {0: "portable C", 1: "AVX2", 2: "AVX-512 VNNI"}  # qt_gemm.h's QT_INT8_SIMD
# optimization, code generation, instruction set, debug and macro flags; nothing that names a file
# to read or write or loads code into the compiler (-o, -I, -include, @file, -B, -wrapper, -fplugin)
CFLAG = re.compile(r"-(O[0-3sgz]?|Ofast|g[0-3]?|march=[A-Za-z0-9_.+-]+|mtune=[A-Za-z0-9_.+-]+|m(no-)?[a-z0-9][a-z0-9.-]*"
                   r"|f(no-)?(?!plugin)[a-z0-9][a-z0-9-]*(=[A-Za-z0-9_.,+-]+)?|D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?"
                   r"|U[A-Za-z_][A-Za-z0-9_]*)")


def compiler_command(cflags: tuple[str, ...] | list[str] = DEFAULT_CFLAGS) -> tuple[str, ...]:
    """cc, the user's flags (codegen.cflags, checked by cflag_errors), then FIXED_CFLAGS."""
    return ("cc", *cflags, *FIXED_CFLAGS)


def cflag_errors(cflags: list[str], key: str = "codegen.cflags") -> list[str]:
    """Why each refused flag is refused (empty: all fine)."""
    return [f"{key}[{index}]={flag!r}: not an optimization, -march/-mtune/-m, -f, -g, -D or -U flag of the C compiler "
            f"(e.g. -O3, -march=native); flags that name files or load plugins are refused"
            for index, flag in enumerate(cflags) if not isinstance(flag, str) or not CFLAG.fullmatch(flag)]


PR_SET_PDEATHSIG = 1  # prctl(2): the signal a child gets when the thread that started it ends
# resolved here, not in the forked child: the child calls a function already loaded (no dlopen, no import after fork)
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _dies_with_this_process(parent: int):
    """A preexec function: the compiler or the network dies when this process does, whatever kills it (a SIGKILL of the
    stage leaves no orphan cc behind); elsewhere than Linux, nothing. Safe here: subprocess.run waits in the thread that
    started the child, which outlives it."""
    prctl = _PRCTL
    if prctl is None:
        return None

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # this process died before the signal was armed
            os._exit(1)
    return arm


def _run(command: list[str], **options) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, preexec_fn=_dies_with_this_process(os.getpid()), **options)


class CompileError(CodegenError, ValueError):
    """The C compiler refused the program; the message carries its diagnostics (a ValueError: the usual cause
    is a flag of codegen.cflags, which the user can change)."""


def compile_program(program_c: Path, output: Path | None = None, defines: tuple[str, ...] = (),
                    compiler: tuple[str, ...] = CC_COMMAND) -> Path:
    """cc -O2 -std=c99 -Wall -Werror [-D...] -o network program.c, in program.c's directory.
    A refusal raises CompileError with the compiler's diagnostics."""
    program_c = Path(program_c)
    output = Path(output) if output is not None else program_c.parent / BINARY_FILE
    if shutil.which(compiler[0]) is None:
        raise CodegenError(f"no C compiler: {compiler[0]!r} is not on PATH")
    command = [*compiler, *(f"-D{define}" for define in defines), "-o", str(output.resolve()), program_c.name]
    result = _run(command, cwd=program_c.parent)
    if result.returncode != 0:
        diagnostics = (result.stderr or result.stdout).strip()
        hint = ("" if tuple(compiler) == CC_COMMAND else
                f"\ncodegen.cflags={list(compiler[1:len(compiler) - len(FIXED_CFLAGS)])} may be what broke the build (a -D or -U "
                f"redefines what the program uses): drop the flags you added, the default is {list(DEFAULT_CFLAGS)}")
        raise CompileError(f"{' '.join(command)} failed (exit {result.returncode}):\n{diagnostics}{hint}")
    return output


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]  # end-point layer -> [N, *shape] int8
    seconds: float  # inside run_network, all images
    wall_s: float  # the whole process
    layers: dict[str, np.ndarray] | None = None  # with a dump build: layer -> [N, *shape] int8
    int8_simd: int = 0  # the conv microkernels the build took (INT8_SIMD_PATHS)


def input_bytes(program: CProgram, images) -> tuple[bytes, int]:
    """(the program's input file, its images): each image's inputs back to back in the program's order of them, each of its
    integers' type. `images`: [N, *input_shape] int8 (a 16x8 program's: int16) for one input; {IR name: [N, *its shape]}
    for several."""
    named = images if isinstance(images, dict) else {next(iter(program.inputs)): images}
    if sorted(named) != sorted(program.inputs):
        raise CodegenError(f"inputs {', '.join(sorted(named))}; the network takes {', '.join(program.inputs)}")
    parts = []
    for name, shape in program.inputs.items():
        values = np.ascontiguousarray(named[name], dtype=program.dtype_of(name))
        if image_shape(tuple(values.shape[1:])) != shape:  # a vector input's [N, C] is its [N, 1, 1, C]
            raise CodegenError(f"{name}: images of shape {list(values.shape)}; the network takes [N, {', '.join(map(str, shape))}]")
        parts.append(values.reshape(len(values), -1).view(np.uint8))
    if len({len(part) for part in parts}) != 1:
        raise CodegenError(f"the inputs hold {[len(part) for part in parts]} images; each holds one per image")
    return np.ascontiguousarray(np.concatenate(parts, axis=1)).tobytes(), len(parts[0])


def run_program(binary: Path, program: CProgram, images, work_dir: Path, dump: bool = False) -> RunResult:
    """Run the built network on int8 (a 16x8 program's: int16) images [N, *input_shape] ({IR name: its images} for a
    network of several inputs: input_bytes); the end points as arrays."""
    data, count = input_bytes(program, images)
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    paths = [work_dir / "input.bin", work_dir / "output.bin", work_dir / "layers.bin"]
    paths[0].write_bytes(data)
    command = [str(Path(binary).resolve()), *map(str, paths[: 3 if dump else 2])]
    started = time.perf_counter()
    result = _run(command)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise CodegenError(f"{' '.join(command)} exited with {result.returncode}: {(result.stderr or result.stdout).strip()}")
    match = re.search(r"images (\d+) seconds ([0-9.eE+-]+) int8_simd (\d)", result.stdout)
    if match is None or int(match.group(1)) != count:
        raise CodegenError(f"{binary}: unexpected report {result.stdout.strip()!r}")
    n = count
    outputs = _split(paths[1].read_bytes(), n, {name: program.shapes[name] for name in program.end_points}, program)
    layers = _split(paths[2].read_bytes(), n, program.shapes, program) if dump else None
    return RunResult(outputs, float(match.group(2)), wall, layers, int(match.group(3)))


def _split(raw: bytes, images: int, shapes: dict[str, tuple[int, ...]], program: CProgram) -> dict[str, np.ndarray]:
    """Per image, the named tensors back to back: each as [images, *shape] of its integers' type."""
    data = np.frombuffer(raw, dtype=np.uint8).reshape(images, -1)
    tensors, start = {}, 0
    for name, shape in shapes.items():
        dtype = program.dtype_of(name)
        size = math.prod(shape) * dtype.itemsize
        tensors[name] = np.ascontiguousarray(data[:, start : start + size]).view(dtype).reshape(images, *shape)
        start += size
    return tensors


def first_difference(ir: Ir, c_layers: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> str | None:
    """The first layer (IR order) whose C output differs from the simulator's, described; None if none."""
    for layer in ir.layers:
        ours, theirs = c_layers[layer.name], np.asarray(expected[layer.name]).reshape(c_layers[layer.name].shape)
        differ = ours != theirs
        if differ.any():
            index = tuple(int(i) for i in np.argwhere(differ)[0])
            return (f"layer {layer.name} ({layer.operation}): {int(differ.sum())} of {differ.size} bytes differ, first at "
                    f"[image, ...] {list(index)}: C {int(ours[index])}, simulator {int(theirs[index])}")
    return None
