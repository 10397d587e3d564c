"""Retrieval-quality benchmark: does two-stage training beat its controls with a real model?

Generates a corpus (default 3,000 patents, seed 11 — not the demo's 7 — at the generator's
``hard`` difficulty), runs the whole pipeline through the ``xembed_full`` Airflow DAG with
the cpu-e5 profile (multilingual-e5-small), and reads the evaluation tables back:

- per model (bm25, base, stage1, sft, xembed) the IPC-section macro Hit@10, Hit@100 and
  nDCG@10, overall and per language, at 64 dimensions (the paper's headline) and full;
- how far each headline number is from its ceiling (100);
- paired randomization p-values (the report's test) for xembed vs base, xembed vs sft and
  stage1 vs base;
- the share of X citations found (top 100) that are in another language than the query's,
  per model, next to that share among all X citations (cross-lingual retrieval is what the
  multilingual views are for).

    python benchmarks/quality.py [--patents 3000] [--seed 11] [--difficulty hard] [--train-steps 60]

Writes benchmarks/results/quality.json; the work folder (lake, models, Airflow home) stays
under --work for inspection (`make sql LAKE=<work>/lake`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import machine, write_result  # noqa: E402
from lake import jvm  # noqa: E402

MODELS = ("bm25", "base", "stage1", "sft", "xembed")
COMPARISONS = (("base", "xembed"), ("sft", "xembed"), ("base", "stage1"))
METRICS = (("hit", 10), ("hit", 100), ("ndcg", 10))
HEADLINE_DIM = 64
LANGS = ("zh", "en", "ja")
TAG = "quality"
PROGRESS = re.compile(r"\[DAG TEST\] end task task_id=\w+|new_state=failed|DagRun Finished.*")


def run_pipeline(args, work: Path) -> float:
    """``airflow dags test xembed_full`` on a fresh lake; returns the wall time in seconds."""
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_HOME": str(work / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "GX_ANALYTICS_ENABLED": "False",
        # ~30 short-lived JVMs: the demo's JVM options (lake/jvm.py, the Makefile)
        "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", jvm.local_options()),
    }
    conf = {
        "lake": str(work / "lake"),
        "work_dir": str(work / "work"),
        "profile": "cpu-e5",
        "sample_patents": args.patents,
        "sample_options": f"--difficulty {args.difficulty}",
        "seed": args.seed,
        "mine_k": args.mine_k,
        "validation_size": args.validation_size,
        "train_steps": args.train_steps,
        "eval_max_length": args.eval_max_length,
        "cutoffs": "10,20,50,100",
        "run_tag": TAG,
    }
    # what --reuse labels its result with: the lake's own build, not the command line's
    (work / CONF).write_text(json.dumps(conf, indent=2, sort_keys=True))
    log = work / "airflow.log"
    airflow = [f"{bin_dir}/airflow"]
    subprocess.run([*airflow, "db", "migrate"], env=env, check=True, capture_output=True)
    start = time.perf_counter()
    print(f"[quality] airflow dags test xembed_full (log: {log})", flush=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*airflow, "dags", "test", "xembed_full", "--conf", json.dumps(conf)],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for line in proc.stdout:
            out.write(line)
            event = PROGRESS.search(line)
            if event:
                print(f"[quality] {time.perf_counter() - start:6.0f}s {event.group(0)}", flush=True)
        proc.wait()
    elapsed = time.perf_counter() - start
    text = log.read_text()
    if proc.returncode != 0 or "state=success" not in text:
        sys.exit(f"[quality] the pipeline failed after {elapsed:.0f}s; see {log}")
    return elapsed


def load_tables(lake: Path):
    from evaluation.report import load

    return load(str(lake), "eval/metrics"), load(str(lake), "eval/per_query")


def macro_table(metrics, dim: int) -> dict:
    """model -> metric@k -> {lang | overall: value (%)} at ``dim`` (BM25 at its only dim)."""
    from evaluation.report import macro

    runs = [f"{m}-{TAG}" for m in MODELS]
    out: dict = defaultdict(dict)
    for metric, k in METRICS:
        frame = macro(metrics, runs, dim, metric, k)
        frame = frame[frame.view == "ALL"]
        for name, group in frame.groupby("name"):
            values = {
                ("overall" if r.lang == "ALL" else r.lang): r.value for r in group.itertuples()
            }
            out[name][f"{metric}@{k}"] = {
                key: round(100 * values[key], 2) for key in ("overall", *LANGS) if key in values
            }
    return dict(out)


def significance(per_query, dim: int, permutations: int) -> dict:
    from evaluation.significance import compare, per_query_values

    out = {}
    for a, b in COMPARISONS:
        rows = {
            name: per_query[(per_query.run_id == f"{name}-{TAG}") & (per_query.dim == dim)]
            for name in (a, b)
        }
        for metric, k in METRICS:
            values = {
                name: per_query_values(r.to_dict("records"), metric, k) for name, r in rows.items()
            }
            tests = compare(values[a], values[b], metric, k, permutations, seed=0)
            out[f"{b}_vs_{a}/{metric}@{k}"] = {
                ("overall" if t["lang"] == "ALL" else t["lang"]): {
                    "diff": round(100 * t["diff"], 2),
                    "p_value": round(t["p_value"], 4),
                    "n_queries": t["n_queries"],
                }
                for t in tests
                if t["view"] == "ALL"
            }
    return out


def cross_lingual(lake: Path, collection: Path, dim: int, depth: int = 100) -> dict:
    """Per model: X citations found in the top ``depth`` and the share in another language."""
    import pyarrow.dataset as ds

    from evaluation.metrics import ranked, read_qrels, read_run

    table = ds.dataset(str(collection), format="parquet").to_table(columns=["id", "lang"])
    doc_lang = dict(
        zip(table.column("id").to_pylist(), table.column("lang").to_pylist(), strict=True)
    )
    out = {}
    for name in MODELS:
        folder = lake / "runs" / f"{name}-{TAG}"
        qrels = read_qrels(str(folder / "qrels.txt"))
        suffix = "_0.trec" if name == "bm25" else f"_{dim}.trec"
        found = cross = total_x = total_cross = 0
        for path in sorted(folder.glob(f"*{suffix}")):
            query_lang = path.name.split("_", 1)[0]
            for qid, results in read_run(str(path)).items():
                relevant = qrels.get(qid, set())
                total_x += len(relevant)
                total_cross += sum(doc_lang.get(d) != query_lang for d in relevant)
                top = ranked(results)[:depth]
                hits = [d for d in top if d in relevant]
                found += len(hits)
                cross += sum(doc_lang.get(d) != query_lang for d in hits)
        out[name] = {
            "x_found": found,
            "x_found_other_language": cross,
            "share_other_language_found": round(cross / found, 4) if found else None,
            "share_other_language_all_x": round(total_cross / total_x, 4) if total_x else None,
            "recall_other_language": round(cross / total_cross, 4) if total_cross else None,
            "recall_same_language": round((found - cross) / (total_x - total_cross), 4)
            if total_x > total_cross
            else None,
        }
    return out


CONF = "conf.json"
# result label -> the DAG conf key it was built with
LABELS = {
    "patents": "sample_patents",
    "seed": "seed",
    "train_steps": "train_steps",
    "mine_k": "mine_k",
    "validation_size": "validation_size",
    "eval_max_length": "eval_max_length",
}


def built_with(args, work: Path) -> None:
    """--reuse: take the labels of the result from the conf the --work lake was built with
    (they were the command line's: a lake built at seed 23 and scored without --seed 23 was
    written down as seed 11); a flag that disagrees is named, the lake's value kept."""
    path = work / CONF
    if not path.is_file():
        raise SystemExit(
            f"quality: --reuse needs {path} (written when the lake is built) to label the "
            "result with the corpus and settings it was built from; rebuild without --reuse"
        )
    conf = json.loads(path.read_text())
    for label, key in LABELS.items():
        if getattr(args, label) != conf[key]:
            print(
                f"[quality] --reuse: the lake was built with {key}={conf[key]}, not "
                f"{getattr(args, label)}: labelling the result with {conf[key]}",
                file=sys.stderr,
            )
            setattr(args, label, conf[key])
    args.difficulty = conf["sample_options"].split()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--patents", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=11, help="corpus seed (the demo uses 7)")
    parser.add_argument("--difficulty", default="hard", choices=["easy", "hard"])
    parser.add_argument("--train-steps", type=int, default=60, help="optimizer steps per training")
    parser.add_argument("--mine-k", type=int, default=100)
    parser.add_argument("--validation-size", type=int, default=64, help="Stage II examples")
    parser.add_argument("--eval-max-length", type=int, default=128)
    parser.add_argument("--permutations", type=int, default=5000)
    parser.add_argument("--work", default=str(REPO / "benchmarks" / ".quality"))
    parser.add_argument("--out", default=None, help="result JSON (default results/quality.json)")
    parser.add_argument(
        "--reuse", action="store_true", help="score an existing --work lake without rerunning"
    )
    args = parser.parse_args(argv)
    work = Path(args.work).resolve()
    if not args.reuse:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        wall = run_pipeline(args, work)
    else:
        wall = None
        built_with(args, work)
    lake = work / "lake"
    metrics, per_query = load_tables(lake)
    headline = macro_table(metrics, HEADLINE_DIM)
    full = macro_table(metrics, int(metrics.dim.max()))  # the model's own dimension
    ceiling = {
        name: {key: round(100 - v["overall"], 2) for key, v in values.items()}
        for name, values in headline.items()
    }
    result = {
        "machine": machine("local[2]"),
        "corpus": {"patents": args.patents, "seed": args.seed, "difficulty": args.difficulty},
        "pipeline": {
            "profile": "cpu-e5",
            "base_model": "builtin:me5-small (multilingual-e5-small)",
            "train_steps": args.train_steps,
            "mine_k": args.mine_k,
            "eval_max_length": args.eval_max_length,
            "wall_seconds": None if wall is None else round(wall, 1),
        },
        "effective_query_views": {
            lang: int(
                per_query[
                    (per_query.run_id == f"base-{TAG}")
                    & (per_query.dim == HEADLINE_DIM)
                    & (per_query.lang == lang)
                ].shape[0]
            )
            for lang in LANGS
        },
        "headline_dim": HEADLINE_DIM,
        "macro_percent_64d": headline,
        "macro_percent_full": full,
        "distance_to_ceiling_64d": ceiling,
        "significance_64d": significance(per_query, HEADLINE_DIM, args.permutations),
        "cross_lingual_64d_top100": cross_lingual(
            lake, work / "work" / "evaluation" / "collection", HEADLINE_DIM
        ),
    }
    ordering = {
        key: [
            name
            for name, _ in sorted(
                ((n, headline[n][key]["overall"]) for n in MODELS if n in headline),
                key=lambda x: -x[1],
            )
        ]
        for key in headline.get("xembed", {})
    }
    result["ordering_64d"] = ordering
    base = headline["base"]["hit@10"]["overall"]
    result["ratio_xembed_vs_base_hit10"] = (
        round(headline["xembed"]["hit@10"]["overall"] / base, 3) if base else None
    )
    write_result("quality", result, args.out)
    print("\nmacro Hit@10 / Hit@100 / nDCG@10 (%), 64 dims, overall:")
    for name in MODELS:
        v = headline.get(name, {})
        print(
            f"  {name:7s} "
            + " / ".join(
                f"{v[m]['overall']:6.2f}" for m in ("hit@10", "hit@100", "ndcg@10") if m in v
            )
        )
    print(f"xembed / base Hit@10 ratio: {result['ratio_xembed_vs_base_hit10']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
