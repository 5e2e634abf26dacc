"""A single-node Slurm cluster on loopback for the tests, as moto is the S3 server: Debian's slurm-wlm and munge
(installed by `make test`'s setup-slurm-cluster where apt-get can), a munge key and daemons under a test directory,
slurmctld and slurmd on their own ports, no accounting, no cgroups. `SLURM_CONF` in the environment it returns points
sbatch, squeue and submitit at it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sinfo", "sbatch")
START_TIMEOUT_S = 60


def missing_binaries() -> list[str]:
    return [name for name in DAEMONS if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]


def _binary(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


SLURM_CONF = """ClusterName=quanttool-test
SlurmctldHost=localhost
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
AuthInfo=socket={root}/munge/socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldPort={port}
SlurmdPort={port_d}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


@contextmanager
def single_node_cluster(root: Path, port: int = 16817) -> Iterator[dict[str, str]]:
    """Slurm running on this machine with its state under `root` (a short path: munge's socket name has a length
    limit); yields the environment that reaches it. Stops the daemons on exit."""
    for directory in ("munge", "state", "spool"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    conf = root / "slurm.conf"
    conf.write_text(SLURM_CONF.format(user=user, root=root, port=port, port_d=port + 1, cpus=os.cpu_count() or 1))
    environment = {**os.environ, "SLURM_CONF": str(conf)}
    key = root / "munge" / "munge.key"
    subprocess.run([_binary("mungekey"), "--create", f"--keyfile={key}", "--force"], check=True, capture_output=True)
    key.chmod(0o600)
    munge = [_binary("munged"), "--force", f"--socket={root}/munge/socket", f"--key-file={key}", f"--pid-file={root}/munge/pid",
             f"--log-file={root}/munge/log", f"--seed-file={root}/munge/seed"]
    pid_files = [root / "munge" / "pid", root / "slurmctld.pid", root / "slurmd.pid"]
    try:
        for command in (munge, [_binary("slurmctld"), "-c"], [_binary("slurmd")]):
            started = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=START_TIMEOUT_S)
            if started.returncode != 0:
                raise RuntimeError(f"{' '.join(command[:2])} did not start: {started.stderr.strip()}")
        _wait_idle(environment, root)
        yield environment
    finally:
        subprocess.run(["scancel", "--user", user], env=environment, capture_output=True)
        for pid_file in reversed(pid_files):
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
            except (OSError, ValueError):
                pass


def _wait_idle(environment: dict[str, str], root: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        state = subprocess.run(["sinfo", "--noheader", "--format=%t"], env=environment, capture_output=True, text=True)
        if state.returncode == 0 and state.stdout.strip() in ("idle", "mix", "alloc"):
            return
        time.sleep(0.5)
    log = (root / "slurmctld.log").read_text()[-2000:] if (root / "slurmctld.log").exists() else ""
    raise RuntimeError(f"the Slurm node did not become idle in {START_TIMEOUT_S} s; slurmctld.log ends:\n{log}")
