"""A team's store on S3: run.py against a real S3-protocol server on loopback (moto's server mode),
store.options passed to fsspec, secrets kept out of MLflow, and a missing fsspec backend explained."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import pytest

from conftest import PROJECT_ROOT, tracking_override
from pipeline.stages import STAGE_NAMES

BUCKET = "quanttool"
CREDENTIALS = ("+store.options.key=testing", "+store.options.secret=testing-secret")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint():
    pytest.importorskip("s3fs", reason="the s3 extra is not installed: make setup-s3 (make test installs it)")
    moto_server = pytest.importorskip("moto.server", reason="moto[server] is a test requirement: make test installs it")
    import boto3

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the server's request log
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing-secret",
                 region_name="us-east-1").create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


def _run_py(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *overrides], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)


def test_a_store_on_s3_is_filled_once_and_serves_another_machine(s3_endpoint, tmp_path):
    """Two 'machines' (two local caches) share s3://quanttool/team: the second reuses every stage."""
    import boto3
    from mlflow.tracking import MlflowClient

    common = [f"store.url=s3://{BUCKET}/team", f"+store.options.endpoint_url={s3_endpoint}", *CREDENTIALS,
              tracking_override(tmp_path), "until=calibrate"]
    first = _run_py(*common, f"store.cache_dir={tmp_path / 'machine-a'}", f"export_dir={tmp_path / 'a'}")
    assert first.returncode == 0, first.stderr[-3000:]
    second = _run_py(*common, f"store.cache_dir={tmp_path / 'machine-b'}", f"export_dir={tmp_path / 'b'}")
    assert second.returncode == 0, second.stderr[-3000:]
    ran = json.loads((tmp_path / "a" / "run.json").read_text())["stages"]
    served = json.loads((tmp_path / "b" / "run.json").read_text())["stages"]
    assert set(served) == set(STAGE_NAMES[: STAGE_NAMES.index("calibrate") + 1])
    assert not any(stage["reused"] for stage in ran.values()) and all(stage["reused"] for stage in served.values())
    assert {name: stage["key"] for name, stage in ran.items()} == {name: stage["key"] for name, stage in served.items()}
    # the entries are in the bucket, each with its manifest (the commit marker)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing", aws_secret_access_key="testing-secret",
                      region_name="us-east-1")
    names = {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="team/")["Contents"]}
    assert {f"team/{name}/{stage['key']}/manifest.json" for name, stage in ran.items()} <= names
    # credentials given as store options never reach MLflow
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("digits").experiment_id])
    assert {run.data.params["store.options.secret"] for run in runs} == {"***"}
    assert all(run.data.params["store.options.endpoint_url"] == s3_endpoint for run in runs)

    # gc on the remote store: no run kept, nothing referenced, every entry goes; so does a damaged local copy this machine
    # moved aside in its cache of the store (ArtifactStore._fetch), counted as damaged
    aside = tmp_path / ".cache" / "store" / ".quarantine" / "fold_check-0123abcd-5678"
    aside.mkdir(parents=True)
    (aside / "report.json").write_text("{}")
    gc = subprocess.run([sys.executable, "-m", "pipeline.store", "gc", "--keep-runs", "0", "--store", f"s3://{BUCKET}/team",
                         "--option", f"endpoint_url={s3_endpoint}", "--option", "key=testing", "--option", "secret=testing-secret"],
                        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=_with_project_path())
    assert gc.returncode == 0, gc.stderr[-3000:]
    assert "1 damaged entry;" in gc.stdout and not aside.exists(), gc.stdout
    left = {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="team/").get("Contents", [])}
    assert not any(key.endswith("/manifest.json") for key in left), left


def _with_project_path() -> dict:
    return {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}


def test_an_unreachable_store_is_refused_before_any_stage_runs(tmp_path):
    pytest.importorskip("s3fs", reason="the s3 extra is not installed: make setup-s3 (make test installs it)")
    completed = _run_py(f"store.url=s3://{BUCKET}/team", f"+store.options.endpoint_url=http://127.0.0.1:{_free_port()}",
                        *CREDENTIALS, tracking_override(tmp_path))
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "store.url=s3://quanttool/team: the store does not answer" in completed.stderr and "endpoint_url" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_a_bucket_that_does_not_exist_is_refused_in_one_message_before_any_stage(s3_endpoint, tmp_path):
    completed = _run_py("store.url=s3://no-such-bucket/team", f"+store.options.endpoint_url={s3_endpoint}", *CREDENTIALS,
                        tracking_override(tmp_path), f"export_dir={tmp_path / 'out'}")
    assert completed.returncode == 2, completed.stderr[-3000:]
    errors = [line for line in completed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "store.url=s3://no-such-bucket/team: the bucket 'no-such-bucket' does not exist" in errors[0], \
        completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr and "NoSuchBucket" not in completed.stderr
    assert "import" not in completed.stderr.split("error:")[0]  # no stage began
    assert not (tmp_path / "out").exists()


def test_a_protocol_whose_fsspec_backend_is_missing_says_what_to_install(tmp_path):
    completed = _run_py("store.url=gs://bucket/team", tracking_override(tmp_path))
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "store.url=gs://bucket/team: the gs:// protocol needs" in completed.stderr and "gcsfs" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_without_s3fs_the_s3_store_names_the_extra_to_install():
    """s3fs hidden from the import system, as on a machine without the extra."""
    code = ("import sys; sys.modules['s3fs'] = None\n"
            "from pipeline.store import StoreError, open_filesystem\n"
            "try:\n    open_filesystem('s3://bucket/team')\nexcept StoreError as error:\n    print(error)\n")
    completed = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "store.url=s3://bucket/team: the s3:// protocol needs s3fs, which is not installed" in completed.stdout and "make setup-s3" in completed.stdout
    assert "requirements-s3.lock" in completed.stdout and (PROJECT_ROOT / "requirements-s3.lock").is_file()
