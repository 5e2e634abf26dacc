"""A stage's code version: the content of every project file its entry module can execute.

The import closure is read from the source (the AST, never by importing): every `import` and
`from ... import` anywhere in a module (function bodies included), relative imports resolved,
each imported module's parent packages (their __init__ runs first), and, for a package whose
__init__ discovers its modules (`pkgutil.iter_modules(__path__)`), every module in it. A module
that reads a data file declares it as `DATA_FILES = ("path", ...)` (paths from the project
root; a directory stands for every file under it), and those files count too.

So a changed file changes the key of exactly the stages that can run it, and nothing else.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pipeline.hashing import canonical_json, sha256_bytes, sha256_file

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("core", "stages", "pipeline")
DISCOVERY_CALL = "iter_modules"


def module_file(module: str, root: Path = PROJECT_ROOT) -> Path | None:
    """The file that defines `module` in the project, or None (a third-party module)."""
    if module.split(".")[0] not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


@dataclass(frozen=True)
class _SourceFacts:
    """What the closure reads from one file's source: its imports (each a module, or a `from` import's base
    module and its names), whether it discovers its package's modules, and its DATA_FILES."""

    imports: tuple[tuple[str, tuple[str, ...]], ...]
    discovers_modules: bool
    data_files: tuple[str, ...]


# What each file's source says, by its path and content digest, kept between processes: parsing the ~160
# files of a closure is most of a stage process's time when its result is in the store. Only a cache: a
# damaged or foreign file is ignored and rewritten, and each entry is sealed (SEAL_KEY) so that one that parses
# but was changed, or was written by another version of this reader, is parsed again: a cache never changes
# what a key covers.
FACTS_CACHE = Path(".cache") / "code_facts.json"
SEAL_KEY = "seal"


@lru_cache(maxsize=None)
def _reader_version() -> str:
    return sha256_file(Path(__file__))


def _seal(key: str, facts: dict) -> str:
    """The digest of an entry's facts with its key (path and content digest) and this reader's own source."""
    return sha256_bytes(canonical_json([_reader_version(), key, facts]))


@lru_cache(maxsize=None)
def _stored_facts(root: Path) -> dict[str, _SourceFacts]:
    try:
        document = json.loads((root / FACTS_CACHE).read_text())
        sealed = {key: entry for key, entry in document.items()
                  if entry.get(SEAL_KEY) == _seal(key, {name: value for name, value in entry.items() if name != SEAL_KEY})}
        return {key: _SourceFacts(tuple((base, tuple(names)) for base, names in entry["imports"]),
                                  entry["discovers_modules"] is True, tuple(entry["data_files"]))
                for key, entry in sealed.items()
                if all(isinstance(base, str) and all(isinstance(name, str) for name in names) for base, names in entry["imports"])
                and all(isinstance(data_file, str) for data_file in entry["data_files"])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


_new_facts: set[Path] = set()


def _save_facts(root: Path) -> None:
    """Writes the cache when this process parsed a file it lacked, keeping one version per file."""
    if root not in _new_facts:
        return
    _new_facts.discard(root)
    stored = _stored_facts(root)
    newest = {key.rpartition(":")[0]: key for key in stored}
    document = {key: {**facts, SEAL_KEY: _seal(key, facts)} for key in newest.values() for facts in [dataclasses.asdict(stored[key])]}
    target = root / FACTS_CACHE
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile("w", dir=target.parent, prefix=".code_facts.", suffix=".tmp", delete=False)
    except OSError:
        return  # a read-only checkout parses each time
    try:
        with handle:
            json.dump(document, handle)
        os.replace(handle.name, target)
    except OSError:
        Path(handle.name).unlink(missing_ok=True)


@lru_cache(maxsize=None)
def _facts_of_version(path: Path, root: Path, mtime_ns: int, size: int) -> _SourceFacts:
    # the digest code_version reads too (one hash of each file per process)
    key = f"{path.relative_to(root).as_posix()}:{_digest_of_version(path, mtime_ns, size)}"
    stored = _stored_facts(root)
    if key not in stored:
        stored[key] = _parse_facts(path.read_bytes(), path, root)
        _new_facts.add(root)
    return stored[key]


def _parse_facts(source: bytes, path: Path, root: Path) -> _SourceFacts:
    tree = ast.parse(source, filename=str(path))
    name = _module_name(path, root)
    package = name if _is_package(path) else name.rpartition(".")[0]
    imports: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imports.append((_absolute(node, package), tuple(alias.name for alias in node.names)))
    return _SourceFacts(tuple(imports), _is_package(path) and _discovers_modules(tree), _data_files_of(tree, path))


def _facts(path: Path, root: Path) -> _SourceFacts:
    """The file's facts, parsed once per version of it (its modification time and size): the eight stages'
    closures share most files, and a sweep's jobs share all of them."""
    status = path.stat()
    return _facts_of_version(path, root, status.st_mtime_ns, status.st_size)


def imported_modules(path: Path, root: Path = PROJECT_ROOT) -> set[str]:
    """The project modules `path` imports (anywhere in it), by name."""
    facts = _facts(path, root)
    found: set[str] = set()
    for base, names in facts.imports:
        found.add(base)
        found.update(f"{base}.{name}" for name in names if module_file(f"{base}.{name}", root))
    if facts.discovers_modules:
        found.update(f"{_module_name(path, root)}.{child}" for child in _children(path.parent))
    return {module for module in found if module_file(module, root) is not None}


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _discovers_modules(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == DISCOVERY_CALL
               for node in ast.walk(tree))


def _children(directory: Path) -> list[str]:
    return sorted(path.stem if path.suffix == ".py" else path.name for path in directory.iterdir()
                  if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").is_file())


def declared_data_files(path: Path, root: Path = PROJECT_ROOT) -> tuple[str, ...]:
    """The module's DATA_FILES: string literals only, read without importing it."""
    return _facts(path, root).data_files


def _data_files_of(tree: ast.Module, path: Path) -> tuple[str, ...]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", None) == "DATA_FILES" for target in node.targets):
            try:
                return tuple(ast.literal_eval(node.value))
            except ValueError:
                raise ValueError(f"{path}: DATA_FILES must be a tuple of string literals (paths from the project root)") from None
    return ()


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts) + 1)]


@lru_cache(maxsize=None)
def import_closure(module: str, root: Path = PROJECT_ROOT) -> tuple[Path, ...]:
    """Every project file executing `module` can run: its modules, sorted, then their data files."""
    seen: set[str] = set()
    pending = list(_with_parents(module))
    while pending:
        current = pending.pop()
        if current in seen or module_file(current, root) is None:
            continue
        seen.add(current)
        for imported in imported_modules(module_file(current, root), root):
            pending.extend(_with_parents(imported))
    sources = sorted({module_file(name, root) for name in seen})
    _save_facts(root)
    data: set[Path] = set()
    for source in sources:
        for declared in declared_data_files(source, root):
            target = root / declared
            data.update(path for path in (sorted(target.rglob("*")) if target.is_dir() else [target]) if path.is_file())
    return tuple(sources) + tuple(sorted(data))


def closure_deps(entry_module: str, root: Path = PROJECT_ROOT) -> list[str]:
    """The closure as dvc.yaml deps: the top-level folders that hold its files (core, pipeline, schemas...).

    Coarse on purpose: DVC re-reads dvc.lock several times per stage it runs, so a lock that names every file
    cost seconds per `dvc exp run`, and `dvc exp show` grew a column per file. A stage DVC re-runs because an
    unrelated file in its folders changed finds its result in the store, keyed by the exact closure."""
    return sorted({path.relative_to(root).parts[0] for path in import_closure(entry_module, root)})


def code_version(entry_module: str, root: Path = PROJECT_ROOT) -> str:
    """The digest of the closure's files, each by content, named relative to the root."""
    files = {path.relative_to(root).as_posix(): _digest(path) for path in import_closure(entry_module, root)}
    return sha256_bytes(canonical_json(files))


@lru_cache(maxsize=None)
def _digest_of_version(path: Path, mtime_ns: int, size: int) -> str:
    return sha256_file(path)


def _digest(path: Path) -> str:
    """The file's SHA-256, read once per version of it (as `_facts`)."""
    status = path.stat()
    return _digest_of_version(path, status.st_mtime_ns, status.st_size)
