"""Benchmark: ingest's probes of an export's files, one at a time against several at once.

Before it reads an export, ingest probes every file so that a damaged one is quarantined
instead of failing the job: a gzip JSON-lines file is decompressed to its end in the driver's
JVM, a Parquet file read whole by a Spark job of its own (``lake.fs.probe_each``). A BigQuery
export of a large corpus is thousands of files. This generates a corpus in ``--files`` gzip
files and writes the same records as as many Parquet files (the input schema), then, in one
Spark session, times the probes of each kind one file at a time and ``fs.PROBE_THREADS`` at a
time, alternating, and checks that both ways give the same probes. Writes
benchmarks/results/input_probe.json with the ratio.

    python benchmarks/input_probe.py --patents 20000 --files 64
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _common import best_of, empty_folder, machine, write_result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--patents", type=int, default=20_000)
    parser.add_argument("--files", type=int, default=64, help="files of each kind")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=2, help="timed repeats (the fastest)")
    parser.add_argument(
        "--work", default=str(Path(__file__).resolve().parent / "work" / "input_probe")
    )
    parser.add_argument("--out", default=None, help="result JSON (default benchmarks/results/)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument(
        "--threads", type=int, default=None, help="probes at once (default fs.PROBE_THREADS)"
    )
    args = parser.parse_args(argv)

    from lake import build_session, fs
    from schemas.inputs import GOOGLE_PATENTS_FIELDS
    from spark_jobs.lib import ingest
    from spark_jobs.lib.sample.generate import generate

    work = empty_folder(args.work)
    spark = build_session("xembed-bench-input-probe", args.master)
    sample, parquet = work / "sample", work / "parquet"
    generate(spark, str(sample), args.patents, args.seed, 0.0, partitions=args.files)
    schema = ingest.input_schema(spark, GOOGLE_PATENTS_FIELDS)
    spark.read.schema(schema).json(str(sample)).repartition(args.files).write.parquet(str(parquet))
    files = ingest.input_files(spark, str(sample))
    gzip_files = [f for f in files if f.endswith(".gz")]
    parquet_files = ingest.input_files(spark, str(parquet))

    def gzip_probes(threads: int):
        return fs.probe_each(lambda name: fs.probe_file(spark, name), gzip_files, threads)

    def parquet_probes(threads: int):
        left_out: list = []
        fs.PROBE_THREADS = threads  # read_parquet probes with the module's setting
        try:
            ingest.read_parquet(spark, parquet_files, GOOGLE_PATENTS_FIELDS, left_out)
        finally:
            fs.PROBE_THREADS = default
        return left_out

    default = fs.PROBE_THREADS
    at_once = args.threads or default
    kinds = {
        "gzip_json_lines": (gzip_probes, gzip_files),
        "parquet": (parquet_probes, parquet_files),
    }
    results = {}
    for kind, (probes, names) in kinds.items():
        one = probes(1)  # warm: the JIT and the page cache
        if probes(at_once) != one:
            raise SystemExit(f"{kind}: the probes differ with {at_once} threads")
        seconds: dict[int, list[float]] = {1: [], at_once: []}
        for _ in range(args.repeats):  # alternating
            for threads in (1, at_once):
                seconds[threads].append(best_of(1, lambda p=probes, t=threads: p(t)))
        before, after = min(seconds[1]), min(seconds[at_once])
        results[kind] = {
            "files": len(names),
            "seconds_one_at_a_time": round(before, 2),
            "seconds_at_once": round(after, 2),
            "speedup": round(before / after, 2),
        }
        print(f"{kind}: {before:.1f}s -> {after:.1f}s ({at_once} at once)")
    spark.stop()
    write_result(
        "input_probe",
        {
            "machine": machine(args.master),
            "patents": args.patents,
            "threads": at_once,
            "same_probes": True,
            "kinds": results,
        },
        args.out,
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
