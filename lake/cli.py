"""One clear line on failure: every job's entry point runs through ``run_job``.

A failing job prints ``<job>: <cause>`` (the table, file or value the error names) and the
path of a log file holding the full Python and Java traces; the failed run itself is already
recorded in ``meta/job_runs`` by ``JobRun``. Exit status 1 (130 on Ctrl-C). ``finish`` ends the
commands that import torch, transformers or GX (training, evaluation, encoding, dq) without the
interpreter's last full garbage collections.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn


def log_dir() -> Path:
    return Path(os.environ.get("XEMBED_LOG_DIR", Path.home() / ".cache" / "xembed" / "logs"))


def one_line(exc: BaseException) -> str:
    """The cause of ``exc`` in one line: the Java exception for JVM errors, else the message."""
    java = getattr(exc, "java_exception", None)
    if java is not None:  # py4j: report the root Java cause, not the py4j wrapper
        cause = java
        while cause.getCause() is not None:
            cause = cause.getCause()
        text = str(cause.toString())
    else:
        text = str(exc) or type(exc).__name__
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    return first if len(first) <= 500 else first[:497] + "..."


def run_job(job: str, main: Callable[[], int]) -> int:
    """Run ``main``; on an error print one line and keep the traces in a log file."""
    try:
        return main()
    except KeyboardInterrupt:
        print(f"{job}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        log = log_dir() / f"{job}-{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.getpid()}.log"
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(traceback.format_exc(), encoding="utf-8")
            where = f"trace: {log}"
        except OSError as error:  # an unwritable log folder: still the one line
            where = f"trace not saved: {error}"
        print(f"{with_prefix(job, one_line(exc))} ({where})", file=sys.stderr, flush=True)
        return 1


def with_prefix(job: str, cause: str) -> str:
    """``<job>: <cause>``, once: the lake's own errors already start with the job's name.

    >>> with_prefix("ingest", "ingest: bronze/publications would be empty")
    'ingest: bronze/publications would be empty'
    >>> with_prefix("curate", "Path does not exist: /lake")
    'curate: Path does not exist: /lake'
    """
    return cause if cause.startswith(f"{job}: ") else f"{job}: {cause}"


def finish(code: int | None) -> NoReturn:
    """``sys.exit(code)`` for a command that imported torch, transformers or GX.

    At exit the interpreter runs full garbage collections over every object still alive
    (~400,000 after importing peft), 1-2 s per training or evaluation process. Freezing the
    heap first leaves them out of those passes; atexit handlers and reference-count
    finalizers still run, and the memory goes back with the process. (Two CPU trainings of
    4 steps, interleaved: 14.4 / 11.2 s plain, 9.9 / 9.4 s frozen.)
    """
    gc.freeze()
    sys.exit(code)


def flag_check(parse):
    """argparse type that checks a flag's text with ``parse`` (a ValueError names the flag)
    and keeps the text: the run's recorded arguments stay what the user wrote."""

    def check(text: str) -> str:
        try:
            parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error).split(": ", 1)[-1]) from None
        return text

    return check
