"""`python -m pipeline.store gc [--dry-run] [--keep-runs N] [--store URL]`: remove the store
entries no recent run and no DVC lock needs (pipeline/store/gc.py says what is kept)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omegaconf import OmegaConf
from rich.console import Console
from rich.markup import escape

from pipeline.store import ArtifactStore, StoreError, open_filesystem
from pipeline.store.gc import DEFAULT_KEEP_RUNS, plan_gc, run_gc

PARAMS_FILE = Path("params.yaml")


def _default_store() -> tuple[str, str, dict]:
    """The store, cache directory and fsspec options params.yaml (conf/ composed) names, else the defaults."""
    if not PARAMS_FILE.exists():
        return ".store", ".cache", {}
    params = OmegaConf.load(PARAMS_FILE)
    options = OmegaConf.select(params, "store.options", default=None)
    return (str(OmegaConf.select(params, "store.url", default=".store")), str(OmegaConf.select(params, "store.cache_dir", default=".cache")),
            OmegaConf.to_container(options) if options is not None else {})


def _check_existing_store(url: str, options: dict) -> None:
    """gc collects a store that is there: a missing path or a file is a mistyped --store, not an empty store."""
    fs, root = open_filesystem(url, options)
    try:
        is_dir = fs.isdir(root)
    except Exception as error:  # each fsspec backend raises its own kinds; all mean the store does not answer
        raise StoreError(f"--store {url}: the store does not answer ({type(error).__name__}: {error})") from None
    if not is_dir:
        what = "is a file" if fs.exists(root) else "does not exist"
        raise StoreError(f"--store {url}: {what}; expected a store directory (the store.url runs write to, e.g. .store)")


def main(argv: list[str]) -> int:
    url, cache_dir, options = _default_store()
    parser = argparse.ArgumentParser(prog="python -m pipeline.store", description="The artifact store's housekeeping: " + " ".join(__doc__.split(": ", 1)[1].split()))
    commands = parser.add_subparsers(dest="command", required=True)
    gc = commands.add_parser("gc", help="remove the entries no recent run and no DVC lock references")
    gc.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    gc.add_argument("--keep-runs", type=int, default=DEFAULT_KEEP_RUNS, help=f"run records kept (default {DEFAULT_KEEP_RUNS})")
    gc.add_argument("--store", default=url, help=f"the store's URL (default: params.yaml's store.url, {url})")
    gc.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="an fsspec option of the store (repeatable), e.g. endpoint_url=http://127.0.0.1:9000; "
                         "replaces params.yaml's store.options")
    args = parser.parse_args(argv)
    if args.option:
        if not all("=" in option for option in args.option):
            parser.error("--option takes KEY=VALUE")
        options = dict(option.split("=", 1) for option in args.option)
    if args.keep_runs < 0:
        parser.error("--keep-runs must be 0 or more")
    console = Console(stderr=False, soft_wrap=True, highlight=False)
    try:
        _check_existing_store(args.store, options)
        store = ArtifactStore(args.store, local_cache=Path(cache_dir).expanduser(), options=options)
    except StoreError as error:
        console.print(f"error: {escape(str(error))}")
        return 2
    plan = plan_gc(store, Path.cwd(), args.keep_runs)
    verb = "would remove" if args.dry_run else "removed"
    for stage, key in plan.remove:
        console.print(escape(f"{verb} {stage}/{key}"))
    console.print(escape(f"{verb} {len(plan.remove)} entr{'y' if len(plan.remove) == 1 else 'ies'} "
                         f"({plan.bytes_freed(store) / 1e6:.1f} MB not shared with DVC's cache), {len(plan.old_records)} old run "
                         f"record(s), {plan.damaged} damaged entr{'y' if plan.damaged == 1 else 'ies'}; "
                         f"kept {len(plan.keep)} (the newest {args.keep_runs} runs, {plan.live_runs} run(s) in progress, dvc.lock and their inputs) "
                         f"in {args.store}"))
    if not args.dry_run:
        run_gc(store, plan)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
