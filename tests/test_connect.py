"""One warm Spark Connect server for many jobs (lake.connect), and the lake layer on a client
session: SQL instead of delta.tables, pyarrow instead of Hadoop's FileSystem.

Client code runs in subprocesses: a Connect session switches pyspark into Connect mode for
its whole process, and this worker's other tests use a classic session.
"""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lake import connect, fs
from spark_jobs import ingest
from spark_jobs.lib.sample.generate import generate
from tests.faults.test_bad_files import _bad_input, _codec_input

# one worker starts this module's server (`server`) once
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.xdist_group("connect")]

ROOT = Path(__file__).resolve().parents[1]

# what the client reports of the lake layer's SQL and file paths (argv: lake, folder, damaged)
CLIENT = """
import json, sys
from datetime import UTC, datetime
from pathlib import Path
from lake import build_session, fs
from lake.session import is_connect, parallelism
from lake.tables import ensure_table, latest_version, restore, table_exists, table_path, write_table
from schemas import table

lake, folder, damaged = sys.argv[1:4]
spark = build_session("xembed-test-connect")
name = "meta/job_runs"
path = table_path(lake, name)
out = {"connect": is_connect(spark), "parallelism": parallelism(spark)}
out["exists_before"] = table_exists(spark, path)
ensure_table(spark, path, table(name))
ensure_table(spark, path, table(name))  # a second time: no error, no commit
out["created"] = latest_version(spark, path)
out["exists_after"] = table_exists(spark, path)
now = datetime.now(UTC)
for run in ("one", "two"):
    row = {"run_id": run, "job": "test", "status": "succeeded", "started_at": now, "finished_at": now}
    rows = spark.createDataFrame([row], table(name).spark_schema())
    write_table(spark, rows, lake, name, user_metadata=f"xembed-run:{run}")
out["mine"] = latest_version(spark, path, "xembed-run:one")
out["newest"] = latest_version(spark, path)
restore(spark, path, 0)
out["restored_newest"] = latest_version(spark, path)
fs.write_text(spark, f"{folder}/a.txt", "one\\ntwo")
fs.rename(spark, f"{folder}/a.txt", f"{folder}/b.txt")
out["names"] = fs.list_names(spark, folder)
out["text"] = fs.read_text(spark, f"{folder}/b.txt")
fs.delete(spark, f"{folder}/b.txt")
out["exists_deleted"] = fs.exists(spark, f"{folder}/b.txt")
out["missing_names"] = fs.list_names(spark, f"{folder}/nothing-here")
out["probes"] = {
    p.split("/")[-1]: [probe.encoding, probe.lines_read, probe.error is not None]
    for p in sorted(str(x) for x in Path(damaged).iterdir())
    for probe in [fs.probe_file(spark, p)]
}
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # a blank in the state folder's path: the JVM option naming its scratch folder is quoted
    state = tmp_path_factory.mktemp("connect state")
    url = connect.start(state, "local[2]", "1g")
    yield state, url
    assert connect.stop(state)
    assert not (state / "connect.pid").exists()
    assert not (state / "scratch").exists()  # the server's local files went with it


def client(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARK_REMOTE": url}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)  # lake.session sets it from SPARK_REMOTE
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_start_reuses_the_running_server_and_names_a_local_url(server):
    state, url = server
    assert url.startswith("sc://127.0.0.1:")
    assert connect.start(state) == url  # a second start finds it alive
    assert (state / "connect.url").read_text().strip() == url
    # Spark's local directory and the JVM's temporary files are the state folder's, not /tmp's
    scratch = state / "scratch"
    assert any(scratch.glob("blockmgr-*")), sorted(p.name for p in scratch.iterdir())


def test_a_state_folder_with_a_comma_is_refused_by_name_before_anything_starts(tmp_path):
    state = tmp_path / "runs,2026" / "spark"
    done = subprocess.run(
        [sys.executable, "-m", "lake.connect", "start", "--state", str(state)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and f"comma-separated list): {state}/scratch" in done.stderr
    assert not (tmp_path / "runs,2026").exists()  # no folder made, no JVM started


def test_a_stale_pid_file_naming_another_program_leaves_it_alone(tmp_path, capsys):
    """A server that died without `stop` (a reboot, a kill -9) leaves its pid file; the
    system may give that pid to another program, whose process group `stop` (and `start`,
    which stops a server that does not answer) killed."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        state = tmp_path / "spark"
        state.mkdir()
        (state / "connect.pid").write_text(str(other.pid))
        (state / "connect.url").write_text(f"sc://127.0.0.1:{connect.free_port()}\n")
        assert connect.stop(state, grace_seconds=2) is False
        assert other.poll() is None  # still running
        assert "is not the Spark Connect server" in capsys.readouterr().err
        assert not (state / "connect.pid").exists() and not (state / "connect.url").exists()
    finally:
        other.kill()
        other.wait()


def test_the_lake_layer_on_a_client_session_matches_a_local_driver(spark, server, tmp_path):
    _, url = server
    damaged, folder = tmp_path / "damaged", tmp_path / "files"
    _bad_input(damaged)
    _codec_input(spark, damaged)
    folder.mkdir()
    done = client(url, "-c", CLIENT, str(tmp_path / "lake"), str(folder), str(damaged))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert out["connect"] is True and out["parallelism"] == 2  # the server's local[2]
    assert (out["exists_before"], out["exists_after"]) == (False, True)
    # created once (version 0), two writes, the first one's commit found by its tag, a restore
    assert (out["created"], out["mine"], out["newest"], out["restored_newest"]) == (0, 1, 2, 3)
    assert out["names"] == ["b.txt"] and out["text"] == "one\ntwo"
    assert out["exists_deleted"] is False and out["missing_names"] == []
    # pyarrow + Python codecs probe exactly as the JVM does (the same quarantine rows follow)
    local = {
        p.name: [probe.encoding, probe.lines_read, probe.error is not None]
        for p in sorted(damaged.iterdir())
        for probe in [fs.probe_file(spark, str(p))]
    }
    assert out["probes"] == local
    assert local["truncated.jsonl.gz"][2] is True and local["truncated.jsonl.gz"][1] > 0
    assert local["utf16.jsonl"][0] == "utf-16-le"


def test_a_job_on_the_server_writes_what_a_local_driver_writes(spark, server, tmp_path):
    state, url = server
    source = tmp_path / "input"
    _bad_input(source)
    remote_lake, local_lake = tmp_path / "remote", str(tmp_path / "local")
    done = client(url, "spark_jobs/ingest.py", "--lake", str(remote_lake), "--input", str(source))
    assert done.returncode == 0, done.stderr[-3000:]
    # the JVM's temporary files (a client's artifacts, Parquet's native codec) are the state
    # folder's too, removed with the server (the fixture checks)
    scratch = sorted(p.name for p in (state / "scratch").iterdir())
    assert any(n.startswith("artifacts-") for n in scratch), scratch
    assert any(n.startswith("snappy-") for n in scratch), scratch
    ingest.run(spark, local_lake, str(source), "google_patents")
    for name, key in (("bronze/publications", "publication_number"), ("quarantine", "record")):
        remote = DeltaTable(str(remote_lake / name)).to_pandas().sort_values(key)
        local = DeltaTable(f"{local_lake}/{name}").to_pandas().sort_values(key)
        kept = [c for c in local.columns if not c.endswith("_at") and c != "run_id"]
        assert len(local) > 0
        assert _same_words(remote[kept]) == _same_words(local[kept])


def _same_words(frame) -> list[list[str]]:
    """Rows as text; a left-out file's error message is the JVM's or Python's wording of the
    same damage, so only its presence is compared (its reason and lines_read are exact)."""
    rows = []
    for row in frame.astype(str).values.tolist():
        for i, value in enumerate(row):
            if value.startswith("{") and '"error"' in value:
                detail = json.loads(value)
                row[i] = json.dumps({**detail, "error": bool(detail["error"])}, sort_keys=True)
        rows.append(row)
    return sorted(rows)


def test_the_sample_generator_on_the_server_writes_the_local_files(spark, server, tmp_path):
    _, url = server
    remote, local = tmp_path / "remote", tmp_path / "local"
    done = client(
        url, "spark_jobs/generate_sample.py", "--out", str(remote), "--patents", "60",
        "--seed", "5", "--bad-share", "0.1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = generate(spark, str(local), n_patents=60, seed=5, bad_share=0.1)
    assert json.loads((remote / "_manifest.json").read_text()) == manifest
    assert manifest["corruptions"]  # the damaged records are part of what is compared
    names = sorted(p.name for p in local.glob("publications-*.jsonl.gz"))
    assert names and sorted(p.name for p in remote.glob("publications-*.jsonl.gz")) == names
    for name in names:
        assert gzip.decompress((remote / name).read_bytes()) == gzip.decompress(
            (local / name).read_bytes()
        )


def test_a_start_killed_while_waiting_leaves_no_server_behind(tmp_path, monkeypatch):
    """A start killed before the server answered left its pid without a URL: the next start
    took the folder for empty, started a second server and overwrote the pid, and `stop`
    never ended the first. An empty pid file (a kill between truncate and write) made both
    commands fail with a traceback."""
    state = tmp_path / "spark"
    state.mkdir()
    (state / "connect.pid").write_text("")
    assert connect.stop(state, grace_seconds=2) is False  # no traceback: nothing to stop
    assert not (state / "connect.pid").exists()
    # a stand-in for the first server: its command line names the server class
    script = "import time; time.sleep(60)"
    first = subprocess.Popen(
        [sys.executable, "-c", script, connect.SERVER_CLASS], start_new_session=True
    )
    try:
        (state / "connect.pid").write_text(str(first.pid))

        def no_second_server():
            raise RuntimeError("the second server would start here")

        monkeypatch.setattr(connect, "free_port", no_second_server)
        with pytest.raises(RuntimeError, match="second server"):
            connect.start(state)
        assert first.wait(timeout=30) is not None  # the first one was stopped
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
