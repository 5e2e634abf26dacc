"""The architecture, checked: imports point one way and never in a cycle, each package says what
it owns, every IR operation is covered by both backends, the schema and the registries agree,
files and functions stay small, and a stage's key follows exactly the code it runs."""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import networkx as nx
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PROJECT_ROOT
from core.backends.accel import isa
from core.backends.accel.lowering import HOST_ONLY, LOWERINGS
from core.backends.accel.ops import lowering_of
from core.backends.c.ops import C_EMITTERS
from core.ir.activations import ACTIVATIONS
from core.backends.c.program import RUNTIME_HEADERS
from core.ir.op import DIALECTS, schema_key
from core.ir.schema import SCHEMA_FILE, branches as schema_branches, schema_text
from core.ir.ops import OPS
from core.ir.records import BITS_KEY, DIALECT_KEY, IrLayer, Padding, Size, _typed, json_fields
from pipeline.code_version import FACTS_CACHE, closure_deps, code_version, declared_data_files, import_closure, imported_modules, module_file
from pipeline.dvcgen import DVC_ENTRY_CODE
from pipeline.stages import STAGES

# Lowest first; a module may import from its own component and from components of lower layers only.
# Siblings in one layer (the two backends) may not import each other.
LAYERS: list[list[tuple[str, ...]]] = [
    [("core.limits",)],
    [("core.data",)],
    [("core.frontend",)],
    [("core.quantize",)],
    [("core.ir",)],
    [("core.backends.c",), ("core.backends.accel",), ("core.backends.tflite",)],
    [("core.backends.program",), ("core.backends.capability",)],
    [("core.backends.operations_table",)],
    [("core.reports",)],
    [("stages", "pipeline", "run", "hydra_plugins")],
]
# files past ~500 lines or functions past ~60 need a reason here (none has one today)
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60
LONG_FUNCTIONS: dict[str, str] = {}


def project_files() -> list[Path]:
    roots = [PROJECT_ROOT / name for name in ("core", "stages", "pipeline", "hydra_plugins")]
    return sorted([*(path for root in roots for path in root.rglob("*.py")), PROJECT_ROOT / "run.py"])


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in project_files():
        graph.add_node(module_name(path))
        for imported in imported_modules(path):
            graph.add_edge(module_name(path), imported)
    return graph


def component_of(module: str) -> tuple[int, int]:
    """(layer, component) of the longest prefix that names the module."""
    best, found = -1, None
    for layer, components in enumerate(LAYERS):
        for index, prefixes in enumerate(components):
            for prefix in prefixes:
                if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                    best, found = len(prefix), (layer, index)
    if found is None:
        raise AssertionError(f"module {module} is in no layer of tests/test_structure.py LAYERS; add its package")
    return found


# --- imports ------------------------------------------------------------------------------------


def test_there_is_no_import_cycle():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_imports_point_down_the_stack_only():
    wrong = []
    for source, target in import_graph().edges:
        (source_layer, source_component), (target_layer, target_component) = component_of(source), component_of(target)
        if target_layer > source_layer or (target_layer == source_layer and target_component != source_component):
            wrong.append(f"{source} -> {target}")
    assert not wrong, "imports pointing up the stack or across siblings:\n" + "\n".join(wrong)


def test_no_project_module_is_imported_inside_a_function():
    found = []
    for path in project_files():
        tree = ast.parse(path.read_text())
        for function in (node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and module_file(node.module or "") is not None:
                    found.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {node.module}")
                if isinstance(node, ast.Import) and any(module_file(alias.name) for alias in node.names):
                    found.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}")
    assert not found, f"function-level imports of project modules: {found}"


def test_every_package_says_what_it_owns():
    for init in sorted((PROJECT_ROOT / "core").rglob("__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text()))
        assert docstring and len(docstring.split()) >= 8, f"{init.relative_to(PROJECT_ROOT)} has no docstring saying what it owns"


def test_the_layers_are_each_a_package_that_exists():
    for components in LAYERS[:-1]:
        for prefixes in components:
            for prefix in prefixes:
                assert module_file(prefix) is not None, prefix


# --- sizes ---------------------------------------------------------------------------------------


def test_no_core_file_is_over_its_size():
    long = [f"{path.relative_to(PROJECT_ROOT)}: {len(path.read_text().splitlines())}"
            for path in sorted((PROJECT_ROOT / "core").rglob("*.py")) if len(path.read_text().splitlines()) > MAX_FILE_LINES]
    assert not long, f"files over {MAX_FILE_LINES} lines: {long}"


def test_no_function_is_over_its_size_without_a_reason():
    long = []
    for path in project_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                where = f"{path.relative_to(PROJECT_ROOT)}:{node.name}"
                if length > MAX_FUNCTION_LINES and where not in LONG_FUNCTIONS:
                    long.append(f"{where} ({length} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


# --- the operation registries ---------------------------------------------------------------


def test_every_operation_of_every_dialect_has_a_c_emitter_and_none_is_for_an_unknown_operation():
    assert set(C_EMITTERS) == {name for ops in DIALECTS.values() for name in ops} == set(OPS)


def test_every_operation_is_lowered_to_the_accelerator_or_declared_host_only():
    every = {name for ops in DIALECTS.values() for name in ops}
    assert set(LOWERINGS) | set(HOST_ONLY) == every and not set(LOWERINGS) & set(HOST_ONLY)
    with pytest.raises(ValueError, match="neither lowered"):
        lowering_of("not_an_operation")


def test_the_schema_is_the_registry():
    """Every operation has one schema branch whose keys are its record's fields (required:
    exactly those without a default), and activation_type lists the registered activations."""
    branches = schema_branches()
    keys = {schema_key(name, dialect): (dialect, op) for dialect, ops in DIALECTS.items() for name, op in ops.items()}
    assert set(branches) == set(keys) and {name for name in OPS} <= set(branches)
    for name, (dialect, op) in keys.items():
        branch = branches[name]
        fields = {spec.name: spec for spec in json_fields(op.record, dialect) if "grid" not in spec.metadata}
        grid_keys = {key for spec in json_fields(op.record, dialect) if "grid" in spec.metadata for key in spec.metadata["grid"].keys(dialect)}
        tagged = {DIALECT_KEY} if len(op.record.dialects) > 1 and dialect != "tf2ir" else set()
        width = {BITS_KEY} if tagged else set()  # optional: absent, int8
        assert set(branch["properties"]) == set(fields) | grid_keys | tagged | width | {"operation"}, name
        required = {key for key, spec in fields.items() if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING}
        assert required | grid_keys | tagged | {"operation"} <= set(branch["required"]), (name, required - set(branch["required"]))
        if "activation_type" in fields:
            assert set(branch["properties"]["activation_type"]["enum"]) == set(ACTIVATIONS), name


def test_every_nested_field_of_every_record_reads_as_its_type():
    """A Size or Padding field (optional or in a tuple too) read from JSON is that dataclass, never the dict: the
    records' readers type every field their hints declare."""
    samples = {Size: {"height": 3, "width": 4}, Padding: {"top": 0, "bottom": 1, "left": 2, "right": 3}}
    checked = []
    for dialect, ops in DIALECTS.items():
        for name, op in ops.items():
            for spec in dataclasses.fields(op.record):
                hint = typing.get_type_hints(op.record)[spec.name]
                for kind, sample in samples.items():
                    if typing.get_origin(hint) is tuple and typing.get_args(hint)[0] is kind:
                        assert all(isinstance(item, kind) for item in _typed([sample], hint, spec.name)), (name, dialect, spec.name)
                        checked.append((name, spec.name))
                    elif kind is hint or kind in typing.get_args(hint):
                        assert isinstance(_typed(sample, hint, spec.name), kind), (name, dialect, spec.name)
                        checked.append((name, spec.name))
    assert ("concat", "output_size") in checked and ("add", "input_size") in checked and ("pad", "padding") in checked


def test_the_published_schema_is_what_the_records_give():
    assert SCHEMA_FILE.read_text() == schema_text(), "schemas/tf2ir_ir.schema.json is stale: run python -m core.ir.schema"


def test_every_record_answers_the_questions_partition_and_the_backends_ask():
    for dialect, ops in DIALECTS.items():
        for name, op in ops.items():
            for method in ("shape_of_output", "shape_of_input", "log2scale_of_input", "log2scale_of_output", "macs", "shifts",
                           "accumulator_bound", "fused_operators"):
                assert getattr(op.record, method) is not getattr(IrLayer, method), f"{name} ({dialect}) does not define {method}"


# --- the ISA: one table for the encoder and the C decoder -------------------------------------


u16, i32 = st.integers(0, 0xFFFF), st.integers(-(2**31), 2**31 - 1)
u32 = st.integers(0, 2**31 - 1)
TOKENS = {"pop": st.integers(0, 15), "push": st.integers(0, 15)}  # the dependency tokens' masks
INSTRUCTIONS = st.one_of(
    st.builds(isa.Load, st.sampled_from(list(isa.BUFFERS)), u32, u32, st.tuples(u16, u16, u16), st.tuples(i32, i32, i32),
              st.tuples(*[st.integers(0, 255)] * 4), st.integers(-128, 127), st.booleans(), **TOKENS),
    st.builds(isa.Store, u32, u32, st.tuples(u16, u16, u16), st.tuples(i32, i32, i32), **TOKENS),
    st.builds(isa.Gemm, st.builds(isa.Loop, u16, u16, u16), *[st.builds(isa.Index, u32, i32, i32, i32)] * 3, st.booleans(), **TOKENS),
    st.builds(isa.Alu, st.sampled_from(list(isa.ALU_OPS)), st.builds(isa.Loop, u16, u16, u16), st.builds(isa.Index, u32, i32, i32, i32),
              st.none(), i32, **TOKENS),
)


@pytest.fixture(scope="module")
def field_reader(tmp_path_factory) -> Path:
    """A C program that prints every field of each 64-byte instruction on stdin as qt_isa.h reads it."""
    work = tmp_path_factory.mktemp("isa")
    (work / "qt_isa_layout.h").write_text(isa.layout_header())
    for name in ("qt_isa.h",):
        shutil.copy(PROJECT_ROOT / "core" / "backends" / "accel" / "runtime" / name, work)
    for header in RUNTIME_HEADERS:
        shutil.copy(header, work)
    prints = []
    for kind, specs in isa.LAYOUT.items():
        reads = " ".join(f'printf("%ld ", {"QT_SFIELD" if spec.signed else "(long)QT_FIELD"}(insn, {kind}, {spec.name.upper()}));'
                         for spec in specs)
        prints.append(f"case QT_OP_{kind}: {reads} break;")
    source = f"""#define QT_ISA_BLOCK 4
#define QT_ISA_INP_BYTES 64
#define QT_ISA_WGT_BYTES 64
#define QT_ISA_ACC_BYTES 64
#include "qt_isa.h"
int main(void)
{{
    uint8_t insn[64];
    while (fread(insn, 1, 64, stdin) == 64) {{
        switch (QT_FIELD(insn, FINISH, OPCODE)) {{
        {chr(10).join(prints)}
        default: break;
        }}
        printf("\\n");
    }}
    return 0;
}}
"""
    (work / "reader.c").write_text(source)
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-Wno-unused-function", "-o", "reader", "reader.c"], cwd=work, check=True)
    return work / "reader"


@settings(max_examples=60, deadline=None)
@given(st.lists(INSTRUCTIONS, min_size=1, max_size=6))
def test_the_c_decoder_reads_every_field_where_the_encoder_put_it(field_reader, program):
    result = subprocess.run([str(field_reader)], input=isa.encode_all(program), capture_output=True, check=True)
    for line, instruction in zip(result.stdout.decode().splitlines(), program):
        values = {"opcode": isa.OPCODES[instruction.kind], **instruction.values()}
        expected = [values[spec.name] for spec in isa.LAYOUT[instruction.kind]]
        assert [int(v) for v in line.split()] == expected, instruction.kind


# --- a stage's key follows the code it runs ------------------------------------------------------


def _copy_project(target: Path) -> Path:
    for name in ("core", "stages", "pipeline", "schemas"):
        shutil.copytree(PROJECT_ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.mark.parametrize("edited, changed", [
    ("core/backends/c/ops/conv.py", {"codegen"}),
    ("core/frontend/folding.py", {"import", "fold_check"}),  # import refuses what folding cannot fold
    ("core/backends/accel/runtime/qt_isa.h", {"codegen"}),
    # calibrate runs emit_ir's checks on its table, the schema's validation among them
    ("schemas/tf2ir_ir.schema.json", {"calibrate", "emit_ir", "simulate", "partition", "codegen"}),
    ("core/ir/ops/conv/kernel.py", {"import", "calibrate", "annotate", "emit_ir", "simulate", "partition", "codegen"}),
    ("core/frontend/graph.py", {stage.name for stage in STAGES}),
])
def test_editing_a_module_changes_the_key_of_the_stages_that_run_it_and_no_other(tmp_path, edited, changed):
    root = _copy_project(tmp_path)
    before = {stage.name: code_version(stage.module, root) for stage in STAGES}
    path = root / edited
    path.write_text(path.read_text() + ("\n# an edit\n" if path.suffix == ".py" else "\n"))
    after = {stage.name: code_version(stage.module, root) for stage in STAGES}
    assert {name for name in before if before[name] != after[name]} == changed


def test_the_parsed_sources_kept_between_processes_give_the_keys_a_fresh_parse_gives(tmp_path):
    """A stage process reads what each source file imports from FACTS_CACHE (by path and content) instead of parsing
    ~160 files again; a cache that is missing, damaged or of the wrong shape is ignored and rewritten, and so is one that
    parses but whose entries were changed (every file's imports emptied, its content digests left right: the issue's case,
    in which a stage was reused after an edit its key no longer covered)."""
    root = _copy_project(tmp_path)
    script = ("import json, sys; from pathlib import Path; from pipeline.code_version import code_version; "
              "from pipeline.stages import STAGES; print(json.dumps([code_version(s.module, Path(sys.argv[1])) for s in STAGES]))")

    def versions() -> list[str]:
        completed = subprocess.run([sys.executable, "-c", script, str(root)], cwd=PROJECT_ROOT, capture_output=True, text=True)
        assert completed.returncode == 0, completed.stderr[-3000:]
        return json.loads(completed.stdout)

    cache = root / FACTS_CACHE
    fresh = versions()
    assert fresh == [code_version(stage.module, root) for stage in STAGES] and cache.is_file()
    assert versions() == fresh  # from the cache
    kept = json.loads(cache.read_text())
    emptied = json.dumps({key: {**entry, "imports": []} for key, entry in kept.items()})  # well-formed, its digests right
    for damaged in ("{not json", json.dumps({"core/__init__.py:0": {"imports": 5, "discovers_modules": 1, "data_files": []}}), emptied):
        cache.write_text(damaged)
        assert versions() == fresh
        assert all(isinstance(entry["imports"], list) for entry in json.loads(cache.read_text()).values())
    assert json.loads(cache.read_text()) == kept  # sealed anew as a fresh parse writes it


def test_the_dvc_pipeline_declares_each_stages_closure():
    """dvc.yaml's code deps of a stage are folders that hold every file of its closure, and none holds none of it
    (the DVC entry's own package aside)."""
    document = yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text())
    for stage in STAGES:
        closure = {path.relative_to(PROJECT_ROOT) for path in import_closure(stage.module)}
        deps = [dep for dep in document["stages"][stage.name]["deps"] if not dep.startswith("dvc_artifacts/")]
        assert set(deps) == set(closure_deps(stage.module)) | set(DVC_ENTRY_CODE), f"dvc.yaml is stale for {stage.name}: run python -m pipeline.dvcgen"
        for path in closure:
            assert any(path.is_relative_to(dep) for dep in deps), f"{stage.name}: {path} is under none of {deps}"
        for dep in set(deps) - set(DVC_ENTRY_CODE):
            assert any(path.is_relative_to(dep) for path in closure), f"{stage.name}: {dep} holds none of its closure"


def test_every_data_file_the_code_reads_is_declared():
    """The non-Python files under core/ and schemas/ all belong to some module's DATA_FILES."""
    declared = set()
    for path in project_files():
        for entry in declared_data_files(path):
            target = PROJECT_ROOT / entry
            declared |= {p for p in (target.rglob("*") if target.is_dir() else [target]) if p.is_file()}
    data = {path for root in ("core", "schemas") for path in (PROJECT_ROOT / root).rglob("*")
            if path.is_file() and path.suffix != ".py" and "__pycache__" not in path.parts}
    assert data <= declared, f"undeclared data files: {sorted(p.relative_to(PROJECT_ROOT).as_posix() for p in data - declared)}"


def test_ruff_finds_nothing_in_the_tree():
    """ruff.toml's rules (pyflakes, syntax errors, bugbear) on every Python file of the project: no unused import or
    variable, no undefined name, no closure over a loop variable."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."], cwd=PROJECT_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing_in_the_modules_it_checks():
    """pyproject.toml's [tool.mypy]: core, stages, pipeline and run.py, less the modules its override lists as not yet
    checked (a new module is checked from its first commit)."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir=/dev/null", "--no-error-summary"], cwd=PROJECT_ROOT,
                            capture_output=True, text=True)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 0 and not errors, result.stdout + result.stderr


def test_the_readme_holds_the_generated_table_of_operations_and_targets():
    from core.backends.operations_table import operation_table

    assert operation_table() in (PROJECT_ROOT / "README.md").read_text(), "run python -m core.backends.operations_table and paste its table"
