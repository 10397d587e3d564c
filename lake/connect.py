"""One warm Spark driver for many short jobs: a local Spark Connect server.

A DAG run or a demo starts some forty short Spark jobs on small data. Through ``spark-submit``
each starts its own driver JVM, loads Spark's and Delta's classes, and runs every query of the
job with a cold JIT, which on small data costs more than the work itself. A Spark Connect
server (``spark-connect`` ships with pyspark; Delta's jars and SQL extensions are on it) is
started once; each job then runs as a thin Python client (``SPARK_REMOTE=sc://...``, which
``lake.session.build_session`` honours) against its warm driver. Each client gets its own
session (its own SQL settings and temporary views); the executors, the JIT's compiled code and
the cached Delta snapshots are shared. Cluster runs keep ``spark-submit --master ...``.

    python -m lake.connect start --state DIR [--master local[2]] [--driver-memory 4g]
        # starts the server in the background, waits until it accepts clients, prints its URL
    python -m lake.connect stop --state DIR   # stops it (SIGTERM, then SIGKILL)

``DIR`` holds ``connect.pid``, ``connect.url``, the server's log ``connect.log`` and its
``scratch`` folder: Spark's local directory (shuffle and spill files, block manager) and the
JVM's temporary files (the clients' artifacts, native libraries), which ``stop`` removes once
the server has ended, however it ended, instead of leaving them in /tmp.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from lake.jvm import long_lived_options, scratch_env
from lake.session import server_conf

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
READY_SECONDS = 180


def free_port() -> int:
    """A TCP port nobody listens on now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_command(master: str, driver_memory: str, port: int) -> list[str]:
    conf = {
        **server_conf(master),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        # a client that exits without stopping its session (every job) frees it after this
        "spark.connect.session.manager.defaultSessionTimeout": "10min",
        "spark.log.level": os.environ.get("XEMBED_SPARK_LOG_LEVEL", "WARN"),
    }
    command = ["spark-submit", "--class", SERVER_CLASS, "--name", "xembed-connect"]
    command += ["--master", master, "--driver-memory", driver_memory]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return command


def _listening(port: int) -> bool:
    with socket.socket() as client:
        client.settimeout(1.0)
        return client.connect_ex(("127.0.0.1", port)) == 0


def _tail(path: Path, lines: int = 30) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def start(state: Path, master: str = "local[2]", driver_memory: str = "4g") -> str:
    """Start a server in the background and return its ``sc://`` URL once it accepts clients.

    A server this ``state`` folder already records and that still answers is reused."""
    scratch = _scratch(state)
    # a long-lived driver wants the full (C2) JIT; the class-data archive still spares loading
    env = scratch_env({**os.environ, "SPARK_SUBMIT_OPTS": long_lived_options()}, scratch)
    state.mkdir(parents=True, exist_ok=True)
    pid_file, url_file, log = state / "connect.pid", state / "connect.url", state / "connect.log"
    if pid_file.exists():
        # a start killed while it waited left the pid without the URL: that server is
        # stopped, never left running beside a second one
        url = url_file.read_text().strip() if url_file.exists() else ""
        pid = _recorded_pid(pid_file)
        if url and pid and _alive(pid) and _ours(pid) and _listening(int(url.rsplit(":", 1)[1])):
            return url
        stop(state)
    shutil.rmtree(scratch, ignore_errors=True)  # a killed server's, if stop never ran
    scratch.mkdir()
    port = free_port()
    env.setdefault("PYSPARK_PYTHON", sys.executable)  # the Python workers of UDFs: this venv
    env.pop("SPARK_REMOTE", None)
    with open(log, "wb") as out:
        server = subprocess.Popen(
            server_command(master, driver_memory, port),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # outlives the task that started it; stop() ends it
        )
    _write_atomically(pid_file, str(server.pid))
    deadline = time.monotonic() + READY_SECONDS
    while not _listening(port):
        if server.poll() is not None or time.monotonic() > deadline:
            stop(state)
            raise RuntimeError(
                f"the Spark Connect server did not start (exit {server.poll()}); "
                f"its log {log} ends with:\n{_tail(log)}"
            )
        time.sleep(0.5)
    url = f"sc://127.0.0.1:{port}"
    _write_atomically(url_file, url + "\n")
    return url


def _scratch(state: Path) -> Path:
    return state / "scratch"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _ours(pid: int) -> bool:
    """Whether process ``pid`` runs the Connect server: a pid file left by a server that died
    (a reboot, a kill -9) may name a pid the system has given to another program since, whose
    process group ``stop`` would have killed."""
    proc = Path(f"/proc/{pid}/cmdline")
    try:
        command = proc.read_bytes().decode(errors="replace") if proc.exists() else None
    except OSError:
        command = None
    if command is None:  # no /proc (macOS): ask ps
        done = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True)
        command = done.stdout
    return SERVER_CLASS in command


def _recorded_pid(pid_file: Path) -> int | None:
    """The pid a state folder records; None for an empty or damaged file (no server to
    reach through it)."""
    try:
        return int(pid_file.read_text().strip())
    except ValueError:
        return None


def _write_atomically(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a kill between truncate and write left it empty)."""
    partial = path.with_name(path.name + ".part")
    partial.write_text(text)
    partial.replace(path)


def stop(state: Path, grace_seconds: float = 30.0) -> bool:
    """Stop the server ``state`` records and remove its scratch folder; False when none was
    running."""
    pid_file = state / "connect.pid"
    if not pid_file.exists():
        shutil.rmtree(_scratch(state), ignore_errors=True)
        return False
    pid = _recorded_pid(pid_file)
    running = pid is not None and _alive(pid) and _ours(pid)
    if pid is not None and _alive(pid) and not running:
        print(
            f"lake.connect: {pid_file} names pid {pid}, which is not the Spark Connect server "
            "(it died, and the pid was reused): left alone",
            file=sys.stderr,
        )
    if running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)  # the server and the Python workers it started
        deadline = time.monotonic() + grace_seconds
        while _alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.2)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    for name in ("connect.pid", "connect.url"):
        (state / name).unlink(missing_ok=True)
    shutil.rmtree(_scratch(state), ignore_errors=True)
    return running


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("start", allow_abbrev=False, help="start a server, print its sc:// URL")
    up.add_argument("--state", type=Path, required=True, help="folder for pid, URL and log")
    up.add_argument("--master", default="local[2]")
    up.add_argument("--driver-memory", default="4g")
    down = sub.add_parser("stop", allow_abbrev=False, help="stop the server a state folder records")
    down.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "start":
        try:
            print(start(args.state, args.master, args.driver_memory))
        except ValueError as error:  # a state folder Spark cannot use, named in the message
            parser.error(str(error))
        return 0
    print("stopped" if stop(args.state) else "no server was running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
