"""Whether the process that wrote a record still runs: its host, pid and start time (PROCESS_TAGS), written by
the process (a run's MLflow tags, a sweep launcher's file, a logged model's tags, a store lease) and read by a later
one, which closes what a killed process left open. A pid is matched with its start time: a reused pid is another
process. Only this machine's processes can be checked; a record of another host is taken as alive."""

from __future__ import annotations

import socket
from collections.abc import Mapping

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
