"""Whether the process that wrote a record still runs: its host, pid and start time (PROCESS_TAGS), written by
the process (a run's MLflow tags, a sweep launcher's file, a logged model's tags, a store lease) and read by a later
one, which closes what a killed process left open. A pid is matched with its start time: a reused pid is another
process. Only this machine's processes can be checked; a record of another host is taken as alive."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path

import psutil

PROCESS_TAGS = ("host", "pid", "pid_started")


def this_process() -> dict[str, str]:
    """This process's PROCESS_TAGS."""
    process = psutil.Process()
    return dict(zip(PROCESS_TAGS, (socket.gethostname(), str(process.pid), repr(process.create_time()))))


def abandoned(tags: Mapping[str, object]) -> bool:
    """Whether `tags` name a process of this host that is gone (killed before it closed what it had opened)."""
    if tags.get("host") != socket.gethostname() or "pid" not in tags:
        return False
    try:
        return repr(psutil.Process(int(str(tags["pid"]))).create_time()) != str(tags.get("pid_started", ""))
    except (psutil.NoSuchProcess, ValueError):
        return True


LAUNCHER_FILE = ".launcher.json"  # in a sweep's directory: the process that launches its jobs and closes its parent run


def record_launcher(directory: str) -> None:
    """Written by the launching process before any job starts: the parent run a job makes carries its PROCESS_TAGS, so a
    launcher killed outright leaves a parent that a later run closes as KILLED, as a job's own run."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=directory, prefix=f"{LAUNCHER_FILE}.")
    with os.fdopen(handle, "w") as stream:
        stream.write(json.dumps(this_process()) + "\n")
    os.replace(partial, Path(directory) / LAUNCHER_FILE)


def launcher_process(directory: str) -> dict[str, str]:
    """The launcher's PROCESS_TAGS, where it recorded them; none otherwise (a parent then waits for the sweep's end)."""
    try:
        tags = json.loads((Path(directory) / LAUNCHER_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {tag: str(tags[tag]) for tag in PROCESS_TAGS if isinstance(tags, dict) and tag in tags}
