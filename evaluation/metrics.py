"""Retrieval metrics from a run and qrels, and their IPC-section / language aggregation.

One function (:func:`score_queries`) computes every per-query metric; ties are broken by
(-score, docid) as in TREC tooling. Aggregation follows the paper: per language x view, the
mean over IPC sections A-H of the per-section means ("IPC-section macro"); per language,
the mean of its views; Overall, the mean of all language x view scores.

    python -m evaluation.metrics --run run.trec --qrels qrels.txt [--query-meta meta.tsv] [--k 10,20,100]
        [--complete]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from lake.cli import flag_check, run_job
from schemas import defaults

SECTIONS = defaults.IPC_SECTIONS
DEFAULT_CUTOFFS = defaults.METRIC_CUTOFFS


def best_first(results: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """(docid, score) pairs in TREC order: by score descending, then docid ascending. Every
    ranked list (the metrics, the written runs, family exclusion, fusion) sorts by this one
    rule, so a file's order is the order its metrics were computed in."""
    return sorted(results, key=lambda x: (-x[1], x[0]))


def ranked(results: Iterable[tuple[str, float]]) -> list[str]:
    """Doc ids best first (:func:`best_first`)."""
    return [doc for doc, _ in best_first(results)]


def ranks_of_relevant(results: list[tuple[str, float]], relevant: set[str]) -> list[int]:
    """The 1-based ranks of the relevant documents in ``ranked(results)``, without sorting
    the run: a document's rank is one plus the number of documents ranked before it (a
    higher score, or the same score and a smaller docid). Only the few relevant documents
    are looked at in Python; the counting runs in numpy."""
    if not results or not relevant:
        return []
    docs, scores = zip(*results, strict=True)
    found = relevant.intersection(docs)
    if not found:
        return []
    values = np.asarray(scores, dtype=np.float64)
    ranks = []
    for doc in found:
        score = values[docs.index(doc)]
        ahead = int(np.count_nonzero(values > score))
        ahead += sum(1 for i in np.flatnonzero(values == score) if docs[i] < doc)
        ranks.append(ahead + 1)
    return sorted(ranks)


def metrics_from_ranks(
    ranks: list[int], n_relevant: int, cutoffs: Iterable[int]
) -> dict[str, float]:
    """Hit@K, Recall@K, MRR and nDCG@10 (binary relevance) from the relevant ranks."""
    out: dict[str, float] = {}
    for k in cutoffs:
        found = sum(1 for r in ranks if r <= k)
        out[f"hit@{k}"] = 1.0 if found else 0.0
        out[f"recall@{k}"] = found / n_relevant if n_relevant else 0.0
    out["mrr"] = 1.0 / min(ranks) if ranks else 0.0
    dcg = sum(1.0 / math.log2(r + 1) for r in ranks if r <= 10)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(n_relevant, 10) + 1))
    out["ndcg@10"] = dcg / ideal if ideal else 0.0
    return out


def score_queries(
    run: dict[str, list[tuple[str, float]]],
    qrels: dict[str, set[str]],
    cutoffs: Iterable[int] = DEFAULT_CUTOFFS,
) -> dict[str, dict[str, float]]:
    """Per-query metrics for every query in ``qrels`` (a query missing from the run scores 0)."""
    cutoffs = list(cutoffs)
    return {
        qid: metrics_from_ranks(ranks_of_relevant(run.get(qid, []), rel), len(rel), cutoffs)
        for qid, rel in qrels.items()
        if rel
    }


def parse_cutoffs(text: str) -> list[int]:
    """Metric cutoffs (``--cutoffs``, ``--k``): integers >= 1, sorted, each once.

    >>> parse_cutoffs("100, 10,10")
    [10, 100]
    >>> parse_cutoffs("0,abc")
    Traceback (most recent call last):
    ValueError: cutoffs: expected integers >= 1, got '0,abc'
    """
    try:
        cutoffs = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        cutoffs = []
    if not cutoffs or cutoffs[0] < 1:
        raise ValueError(f"cutoffs: expected integers >= 1, got {text!r}")
    return cutoffs


def parse_metric(name: str) -> tuple[str, int | None]:
    base, _, k = name.partition("@")
    return base, int(k) if k else None


def aggregate(rows: list[dict], metric_names: list[str]) -> list[dict]:
    """Aggregate per-query rows (lang, view, ipc_section, <metric>...) like the paper.

    Returns rows with lang/view/ipc_section set to a value, ``ALL`` or ``MACRO``:
    per (lang, view): each section A-H, MACRO (mean of section means) and ALL (mean of
    queries); per lang: MACRO = mean of its views' MACRO; ALL/ALL/MACRO = Overall, the mean
    of every language x view MACRO.
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["lang"], r["view"])].append(r)
    out = []
    macro: dict[tuple, dict[str, float]] = {}
    sectioned: dict[tuple, int] = {}  # query views with an IPC section, per (lang, view)
    for (lang, view), members in sorted(groups.items()):
        by_section: dict[str, list[dict]] = defaultdict(list)
        for r in members:
            if r.get("ipc_section") in SECTIONS:
                by_section[r["ipc_section"]].append(r)
        for name in metric_names:
            section_means = {}
            for section, qs in sorted(by_section.items()):
                section_means[section] = sum(q[name] for q in qs) / len(qs)
                out.append(_row(lang, view, section, name, section_means[section], len(qs)))
            all_mean = sum(q[name] for q in members) / len(members)
            out.append(_row(lang, view, "ALL", name, all_mean, len(members)))
            if section_means:
                value = sum(section_means.values()) / len(section_means)
                macro.setdefault((lang, view), {})[name] = value
                sectioned[(lang, view)] = sum(len(q) for q in by_section.values())
                out.append(_row(lang, view, "MACRO", name, value, sectioned[(lang, view)]))
    # n_queries is the query views a row stands on (it was the number of views, or of cells)
    for name in metric_names:
        langs: dict[str, list[tuple]] = defaultdict(list)
        for cell, values in macro.items():
            if name in values:
                langs[cell[0]].append(cell)
        for lang, cells in sorted(langs.items()):
            value = sum(macro[c][name] for c in cells) / len(cells)
            out.append(_row(lang, "ALL", "MACRO", name, value, sum(sectioned[c] for c in cells)))
        cells = [c for c in macro if name in macro[c]]
        if cells:
            value = sum(macro[c][name] for c in cells) / len(cells)
            out.append(_row("ALL", "ALL", "MACRO", name, value, sum(sectioned[c] for c in cells)))
    return out


def _row(lang, view, section, name, value, n):
    metric, k = parse_metric(name)
    return {
        "lang": lang,
        "view": view,
        "ipc_section": section,
        "metric": metric,
        "k": k,
        "value": float(value),
        "n_queries": int(n),
    }


# --- TREC files --------------------------------------------------------------------------------


def _number(path: str, lineno: int, field: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{path}:{lineno}: {field} {text!r} is not a number") from None
    if math.isnan(value):  # it compares false with everything: it would rank first
        raise ValueError(f"{path}:{lineno}: {field} is NaN")
    return value


def read_run(path: str) -> dict[str, list[tuple[str, float]]]:
    """A TREC run: qid -> [(docid, score)]. Refuses, naming the line, a score that is not a
    number or is NaN, and a document listed twice for one query (trec_eval refuses such a run
    too; counted twice it would push every document after it one rank down)."""
    run: dict[str, list[tuple[str, float]]] = defaultdict(list)
    first_line: dict[tuple[str, str], int] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise ValueError(
                    f"{path}:{lineno}: expected 'qid Q0 docid rank score tag', got {line!r}"
                )
            qid, doc = parts[0], parts[2]
            seen = first_line.setdefault((qid, doc), lineno)
            if seen != lineno:
                raise ValueError(
                    f"{path}:{lineno}: document {doc} is listed twice for query {qid} "
                    f"(also line {seen})"
                )
            run[qid].append((doc, _number(path, lineno, "score", parts[4])))
    return dict(run)


def read_qrels(path: str) -> dict[str, set[str]]:
    """TREC qrels: qid -> the documents with relevance > 0 (empty for a query judged only
    non-relevant: it has nothing to find, and the command scores it 0)."""
    qrels: dict[str, set[str]] = defaultdict(set)
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise ValueError(f"{path}:{lineno}: expected 'qid 0 docid relevance', got {line!r}")
            relevant = qrels[parts[0]]
            if _number(path, lineno, "relevance", parts[3]) > 0:
                relevant.add(parts[2])
    return dict(qrels)


def write_run(path: str, run: dict[str, list[tuple[str, float]]], tag: str) -> None:
    """The run as a TREC file, each score written to the digits that read back as the same
    float (Python's repr): rounded, two close dense scores would tie in the file, and the
    docid would then rank them apart from the metrics computed from the run itself."""
    with open(path, "w", encoding="utf-8") as f:
        for qid in sorted(run):
            for rank, (doc, score) in enumerate(best_first(run[qid]), start=1):
                f.write(f"{qid} Q0 {doc} {rank} {float(score)!r} {tag}\n")


def write_qrels(path: str, qrels: dict[str, set[str]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for qid in sorted(qrels):
            for doc in sorted(qrels[qid]):
                f.write(f"{qid} 0 {doc} 1\n")


def read_meta(path: str) -> dict[str, dict]:
    """qid -> {lang, view, ipc_section} from a TSV with header qid, lang, view, ipc_section."""
    meta = {}
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header[:4] != ["qid", "lang", "view", "ipc_section"]:
            raise ValueError(f"{path}: header must be qid, lang, view, ipc_section; got {header}")
        for lineno, line in enumerate(f, 2):
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                raise ValueError(f"{path}:{lineno}: expected 4 tab-separated fields, got {line!r}")
            qid, lang, view, section = fields[:4]
            meta[qid] = {"lang": lang, "view": view, "ipc_section": section or None}
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--run", required=True, help="TREC run: qid Q0 docid rank score tag")
    parser.add_argument("--qrels", required=True, help="TREC qrels: qid 0 docid relevance")
    parser.add_argument(
        "--query-meta", default=None, help="TSV qid, lang, view, ipc_section (for the macro)"
    )
    parser.add_argument(
        "--k", default=",".join(map(str, DEFAULT_CUTOFFS)), type=flag_check(parse_cutoffs)
    )
    parser.add_argument(
        "--complete",
        action="store_true",
        help="average over every query in --qrels, a query missing from the run scoring 0 "
        "(trec_eval -c); by default only the run's queries count, as in trec_eval",
    )
    args = parser.parse_args(argv)
    cutoffs = parse_cutoffs(args.k)
    run, qrels = read_run(args.run), read_qrels(args.qrels)
    if not args.complete:
        qrels = {qid: rel for qid, rel in qrels.items() if qid in run}
    per_query = score_queries(run, qrels, cutoffs)
    # A query judged only non-relevant finds nothing: trec_eval and ranx score it 0 in every
    # metric and count it in the mean, and so does this command (score_queries, for the
    # pipeline's effective queries, leaves it out).
    nothing_to_find = sorted(qid for qid, rel in qrels.items() if not rel)
    if nothing_to_find:
        per_query.update({qid: metrics_from_ranks([], 0, cutoffs) for qid in nothing_to_find})
        print(
            f"metrics: {len(nothing_to_find)} queries of --qrels have no relevant document "
            f"(relevance > 0) and score 0, as in trec_eval and ranx, e.g. {nothing_to_find[:3]}",
            file=sys.stderr,
        )
    names = sorted({m for v in per_query.values() for m in v})
    result: dict = {
        "n_queries": len(per_query),
        "mean": {m: sum(v[m] for v in per_query.values()) / len(per_query) for m in names}
        if per_query
        else {},
    }
    if args.query_meta:
        meta = read_meta(args.query_meta)
        missing = sorted(set(per_query) - set(meta))
        if missing:
            parser.error(f"{len(missing)} queries have no row in --query-meta, e.g. {missing[:3]}")
        rows = [{**meta[q], **v} for q, v in per_query.items()]
        result["aggregated"] = aggregate(rows, names)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(run_job("metrics", main))
