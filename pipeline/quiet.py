"""TensorFlow's native start-up notices, dropped. Its C++ runtime writes them straight to file
descriptor 2 while the library loads, before its logging is configured, so TF_CPP_MIN_LOG_LEVEL
cannot hide them ("All log messages before absl::InitializeLog() ...", "oneDNN custom operations
are on ..."). While a stage module (and with it TensorFlow) is imported, descriptor 2 is a pipe
whose lines are passed on as they come, except those notices. TF_CPP_MIN_LOG_LEVEL=0 or 1 (the
user asking for TensorFlow's info lines) leaves stderr alone."""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

NATIVE_NOTICES = (b"All log messages before absl::InitializeLog() is called", b"oneDNN custom operations are on")


def _forward(source: int, target: int) -> None:
    pending = b""
    while chunk := os.read(source, 65536):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()  # an unfinished line: Rich redraws without newlines, so pass it on unless it may be a notice
        kept = [line + b"\n" for line in lines if not any(notice in line for notice in NATIVE_NOTICES)]
        if pending and not pending.startswith((b"W", b"I")):
            kept.append(pending)
            pending = b""
        if kept:
            os.write(target, b"".join(kept))
    if pending and not any(notice in pending for notice in NATIVE_NOTICES):
        os.write(target, pending)


@contextmanager
def native_notices_dropped() -> Iterator[None]:
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") in ("0", "1") or "tensorflow" in sys.modules:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    forwarder = threading.Thread(target=_forward, args=(read_end, saved), daemon=True)
    forwarder.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last writer closes: the forwarder drains it and stops
        forwarder.join(timeout=5)
        os.close(read_end)
        os.close(saved)
