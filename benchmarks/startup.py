"""Benchmark: the fixed cost of one short Spark job, before and after the start-up work.

A DAG run or a test session starts dozens of local driver JVMs on tiny data; each pays for
loading Spark's classes and warming the JIT before it does any work, and a pytest worker runs
its whole share of the suite in one driver. This script prepares a small lake once
(generate -> ingest -> curate, not timed), then runs through `spark-submit`, `--repeats`
times under each JVM setting (interleaved, so drift hits all alike):
  empty    a job that starts a Delta-enabled session and stops it (pure fixed cost)
  split    spark_jobs/split.py on that lake (a real short job: pinned reads, two table
           writes, the leakage self-check, the run record)
  session  one driver doing what a test worker does: generate -> ingest -> curate on a
           fresh lake, then split twice (`--session-repeats` times; c1+cds and local only)
settings:
  default  no JVM options (a plain spark-submit)
  c1       -XX:TieredStopAtLevel=1 (C1-only JIT; what make demo / make test used first)
  c1+cds   c1 plus the class-data-sharing archive of `python -m lake.jvm archive`
  local    `python -m lake.jvm options`: c1+cds with a 240 MB code cache (C1 alone gets 48 MB,
           fills it, and disables the JIT); what each spark-submit of the tests uses
  connect  no spark-submit: the job is a Python client (SPARK_REMOTE) of one Spark Connect
           server (`python -m lake.connect`) the script starts once, as a DAG run does; its
           first, cold job is timed apart (connect_first) and not in the median
and writes benchmarks/results/startup.json: median seconds per job and setting, and each
setting's median over local's (c1 / local is before / after the JVM start-up work) and over
connect's (local / connect is before / after the warm driver).

    python benchmarks/startup.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import empty_folder, machine, prepare_lake, timed, write_result

ROOT = Path(__file__).resolve().parents[1]
EMPTY_JOB = """
from lake import build_session
build_session("xembed-bench-empty").stop()
"""
SESSION_JOB = """
import shutil, sys
from datetime import date
from pathlib import Path

sys.path.insert(0, {bench!r})
from _common import prepare_lake
from lake import build_session
from spark_jobs import split

work, patents = Path(sys.argv[1]), int(sys.argv[2])
spark = build_session("xembed-bench-session")
prepare_lake(spark, work, patents, 7, split=False)
for _ in range(2):
    split.run(spark, str(work / "lake"), date(2025, 1, 1))
spark.stop()
shutil.rmtree(work)
"""


def settings() -> dict[str, str]:
    from lake import jvm

    cds = jvm.cds_options() or f"-XX:SharedArchiveFile={jvm.archive()} {jvm.QUIET}"
    c1 = "-XX:TieredStopAtLevel=1"
    return {"default": "", "c1": c1, "c1+cds": f"{c1} {cds}", "local": f"{jvm.C1_JIT} {cds}"}


def submit(script: str, args: list[str], options: str, master: str, remote: str = "") -> float:
    """Seconds of one run: a spark-submit with ``options``, or a client of ``remote``."""
    env = {**os.environ, "SPARK_SUBMIT_OPTS": options, "PYSPARK_PYTHON": sys.executable}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env.pop("SPARK_REMOTE", None)
    command = ["spark-submit", "--master", master, "--driver-memory", "4g", script, *args]
    if remote:
        env["SPARK_REMOTE"] = remote
        command = [sys.executable, script, *args]
    start = time.perf_counter()
    subprocess.run(
        command,
        env=env,
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--patents", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--session-repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work", default=str(Path(__file__).resolve().parent / "work" / "startup"))
    parser.add_argument(
        "--settings",
        default="default,c1,c1+cds,local,connect",
        help="comma-separated settings to time (the session job runs under c1+cds and local)",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    chosen = args.settings.split(",")

    from lake import build_session, connect

    work = empty_folder(args.work)
    lake = work / "lake"
    prep: dict[str, float] = {}
    with timed("prepare_lake", prep):
        spark = build_session("xembed-bench-startup", args.master)
        prepare_lake(spark, work, args.patents, args.seed, split=False)
        spark.stop()
    empty = work / "jobs" / "empty_job.py"  # not beside ./lake, which would shadow the package
    empty.parent.mkdir()
    empty.write_text(EMPTY_JOB)
    session = work / "jobs" / "session_job.py"
    session.write_text(SESSION_JOB.format(bench=str(Path(__file__).resolve().parent)))
    options = settings()
    jobs = {  # job: (script, arguments, settings, repeats)
        "empty": (str(empty), [], [*options, "connect"], args.repeats),
        "split": (
            "spark_jobs/split.py",
            ["--lake", str(lake), "--eval-cutoff", str(date(2025, 1, 1))],
            [*options, "connect"],
            args.repeats,
        ),
        "session": (
            str(session),
            [str(work / "session"), str(args.patents)],
            ["c1+cds", "local"],
            args.session_repeats,
        ),
    }
    jobs = {
        job: (script, job_args, [s for s in job_settings if s in chosen], repeats)
        for job, (script, job_args, job_settings, repeats) in jobs.items()
        if repeats > 0 and any(s in chosen for s in job_settings)
    }
    seconds = {job: {s: [] for s in spec[2]} for job, spec in jobs.items()}
    state = work / "connect"
    remote = connect.start(state, args.master, "4g")
    try:
        split_script, split_args = jobs["split"][:2]
        first = round(submit(split_script, split_args, "", args.master, remote), 2)
        print(f"[0] split   connect  {first:6.1f}s (the server's first job, cold)", flush=True)
        for repeat in range(max(spec[3] for spec in jobs.values())):
            for job, (script, job_args, job_settings, repeats) in jobs.items():
                for setting in job_settings if repeat < repeats else []:
                    client = remote if setting == "connect" else ""
                    took = submit(script, job_args, options.get(setting, ""), args.master, client)
                    seconds[job][setting].append(round(took, 2))
                    print(
                        f"[{repeat + 1}/{repeats}] {job:7s} {setting:8s} {took:6.1f}s", flush=True
                    )
    finally:
        connect.stop(state)
    medians = {
        j: {s: round(statistics.median(v), 2) for s, v in by.items()} for j, by in seconds.items()
    }
    ratios = {
        f"{job}_{setting}_over_local": round(median / m["local"], 2)
        for job, m in medians.items()
        for setting, median in m.items()
        if setting not in ("local", "connect") and "local" in m
    }
    ratios |= {
        f"{job}_local_over_connect": round(m["local"] / m["connect"], 2)
        for job, m in medians.items()
        if "connect" in m and "local" in m
    }
    write_result(
        "startup",
        {
            "machine": machine(args.master),
            "patents": args.patents,
            "repeats": args.repeats,
            "jvm_options": options,
            "seconds_prepare": prep,
            "seconds_split_connect_first": first,
            "seconds": seconds,
            "median_seconds": medians,
            **ratios,
        },
        args.out,
    )
    for job, m in medians.items():
        print(
            f"{job}: "
            + ", ".join(f"{setting} {median:.1f}s" for setting, median in m.items())
            + " -> "
            + ", ".join(
                f"{setting}/local {median / m['local']:.2f}x"
                for setting, median in m.items()
                if setting not in ("local", "connect") and "local" in m
            )
            + (
                f", local/connect {m['local'] / m['connect']:.2f}x"
                if "connect" in m and "local" in m
                else ""
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
