"""Follow an `airflow dags test` run: one line per task on the terminal, the full log in a file.

    python dags/progress.py --log demo/logs/dag.log -- airflow dags test xembed_full --conf '{...}'

Every line of the command's output (Airflow, Spark, trainer) goes to ``--log``, whose path is
printed first. The terminal gets one line per finished task:

    [ 7/38] build_pairs        41.2s  success  pairs_written=2,140 candidates=2,702

(n/N, task, seconds, state, up to four of the counters the task's jobs reported). On a failed
task or a failed run the last lines of the log and its path are printed; the exit status is
the command's. Not a DAG file (listed in .airflowignore).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import deque
from contextlib import redirect_stderr, redirect_stdout
from datetime import datetime
from pathlib import Path

START = re.compile(r"\[DAG TEST\] starting task_id=(\w+)")
END = re.compile(r"\[DAG TEST\] end task task_id=(\w+)")
STATE = re.compile(r"Task instance state updated .* new_state=(\w+)")
# JobRun.report lines ("[job]   counter   1,234") and the trainer's final loss
COUNTER = re.compile(r"\[[a-z_0-9]+\]\s+([a-z][a-z_0-9]*)\s+([\d,]+)\s")
LOSS = re.compile(r"'train_loss': '?([\d.]+)")
RUN_DONE = re.compile(r"DagRun Finished: .*state=(\w+)")
RETRY_STATES = ("up_for_retry", "up_for_reschedule")  # the task runs again: not its end
# counters worth a place on the one line, in this order (per-language or per-section
# breakdowns such as eval_queries_en never are)
KEY_COUNTERS = (
    "records_kept",
    "records_total",
    "patents_out",
    "eval_queries",
    "excluded_families",
    "pairs_written",
    "examples",
    "rows",
    "candidates",
    "edges_legal",
    "edges_technical",
    "effective_query_views",
    "train_loss",
)
TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z")


def count_tasks(dag_id: str) -> int | None:
    """The number of tasks of ``dag_id`` (from the DAGs folder), None when it cannot tell."""
    try:
        from airflow.dag_processing.dagbag import DagBag

        with open(os.devnull, "w") as quiet, redirect_stdout(quiet), redirect_stderr(quiet):
            dag = DagBag(dag_folder=str(Path(__file__).resolve().parent)).dags.get(dag_id)
        return len(dag.tasks) if dag else None
    except Exception:  # the run itself reports a broken DAG; the count is a courtesy
        return None


def key_counters(counters: dict[str, str], limit: int = 4) -> str:
    chosen = [name for name in KEY_COUNTERS if name in counters][:limit]
    return " ".join(f"{name}={counters[name]}" for name in chosen)


def seconds_at(line: str) -> float:
    """The line's own timestamp (Airflow's log lines carry one), else the clock now."""
    match = TIMESTAMP.match(line)
    return datetime.fromisoformat(match.group(1)).timestamp() if match else time.time()


def follow(command: list[str], log: Path, total: int | None) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"full log: {log}", flush=True)
    width = len(str(total or 99))
    done, started, state = 0, 0.0, "?"
    counters: dict[str, str] = {}
    tail: deque[str] = deque(maxlen=40)
    final: dict[str, str] = {}  # each task's state at its last end (a retry ends it twice)
    run_state = None
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
        for line in process.stdout:
            out.write(line)
            tail.append(line.rstrip())
            if match := START.search(line):
                started, state, counters = seconds_at(line), "?", {}
            elif match := STATE.search(line):
                state = match.group(1)
            elif match := END.search(line):
                task_id = match.group(1)
                retried = state in RETRY_STATES
                done += not retried and final.get(task_id, RETRY_STATES[0]) in RETRY_STATES
                seconds = seconds_at(line) - started
                print(
                    f"[{done:>{width}}/{total or '?'}] {task_id:22s} {seconds:7.1f}s  "
                    f"{state:8s} {key_counters(counters)}".rstrip(),
                    flush=True,
                )
                final[task_id] = state
            elif match := COUNTER.search(line):
                # a task of two jobs (export_stage2: training, then validation) shows both
                name, value = match.groups()
                counters[name] = f"{counters[name]}+{value}" if name in counters else value
            elif match := LOSS.search(line):
                counters["train_loss"] = match.group(1)
            if match := RUN_DONE.search(line):
                run_state = match.group(1)
        code = process.wait()
    # a task retried and then successful is no failure (the DAG retries once by design)
    failed = [t for t, state in final.items() if state not in ("success", "skipped", "?")]
    if code != 0 or failed or run_state not in (None, "success"):
        print("\n".join(["", "last lines of the log:", *list(tail)[-20:]]), file=sys.stderr)
        what = f"task(s) {', '.join(failed)}" if failed else f"the run ({run_state or code})"
        print(f"FAILED: {what}; the full log is {log}", file=sys.stderr, flush=True)
        return code or 1
    print(f"run {run_state or 'finished'}; the full log is {log}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--log", required=True, help="file for the command's whole output")
    parser.add_argument("--dag", default="xembed_full", help="DAG id (for the task count)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- airflow dags test ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to follow after --")
    return follow(command, Path(args.log), count_tasks(args.dag))


if __name__ == "__main__":
    sys.exit(main())
