"""Evaluation tasks beyond X retrieval (issue 13): domain relevance (InScope), hybrid fusion
(reciprocal rank fusion), and classification / clustering on frozen embeddings.

Definitions that are ours (the neighbouring papers' abstracts give none; README "Evaluation
tasks"):

- **InScope@k** at level ``subclass`` (4 characters, e.g. ``H01M``) or ``section`` (1
  character): for one query, the share of its top-k retrieved documents that share at least
  one IPC code at that level with the query; a document without IPC codes does not share.
  Averaged over queries; a query with no IPC code is left out (counted).
- **RRF**: score(d) = sum over runs of 1 / (k + rank of d in that run), k = 60, ranks from 1
  after the run's own (-score, docid) order; documents missing from a run add nothing.
- **Classification probe**: logistic regression on L2-normalised embeddings, split by
  family with a seeded hash (no family in both halves), macro- and micro-F1 on the test half.
- **Clustering**: k-means with k = number of distinct labels (seeded, 10 restarts),
  V-measure, homogeneity and completeness against the labels.
- **Strata**: each query view falls in one cell per key: ``year=`` (filing year),
  ``section=`` (main IPC section), ``country=`` (jurisdiction), ``lang=`` and, with a
  landscape, ``landscape=IN|OUT`` (IN: the query's main IPC section is in the landscape; a
  query without a section is OUT). A cell's value is the mean over its query views (per query
  type and over all of them, ``view = ALL``); cells below the minimum count are marked
  ``small_cell``, never hidden. The landscape gap is (IN - OUT) / IN in percent.
"""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

import numpy as np

from evaluation.metrics import best_first, parse_metric, ranked

RRF_K = 60
F1_METRICS = ("macro_f1", "micro_f1")
V_METRICS = ("v_measure", "homogeneity", "completeness")
IPC_LEVELS = {"subclass": 4, "section": 1}
STRATUM_FIELDS = (
    ("year", "filing_year"),
    ("section", "ipc_section"),
    ("country", "country_code"),
    ("lang", "lang"),
)


def in_landscape(query: Mapping, landscape: frozenset[str]) -> bool | None:
    """Whether the query's main IPC section is in the landscape (a query without section is
    not); None when there is no landscape."""
    return query.get("ipc_section") in landscape if landscape else None


def strata(query: Mapping, landscape: frozenset[str] = frozenset()) -> list[str]:
    """The strata cells of one query (``year=2025``, ..., ``landscape=IN``)."""
    cells = []
    for key, field in STRATUM_FIELDS:
        value = query.get(field)
        cells.append(f"{key}={'unknown' if value in (None, '') else value}")
    if landscape:
        cells.append("landscape=" + ("IN" if in_landscape(query, landscape) else "OUT"))
    return cells


def stratify(rows: list[dict], names: list[str], min_cell: int) -> list[dict]:
    """Mean of each metric per stratum cell, per query type and over all (``view = ALL``).

    ``rows``: per query view, with ``view``, ``strata`` (from :func:`strata`) and the metric
    values under ``names``; returns eval/metrics-shaped rows (lang and ipc_section ``ALL``).
    """
    cells: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        for cell in row["strata"]:
            cells[(cell, row["view"])].append(row)
            cells[(cell, "ALL")].append(row)
    out = []
    for (cell, view), members in sorted(cells.items()):
        for name in names:
            metric, k = parse_metric(name)
            out.append(
                {
                    "lang": "ALL",
                    "view": view,
                    "ipc_section": "ALL",
                    "stratum": cell,
                    "metric": metric,
                    "k": k,
                    "value": float(sum(r[name] for r in members) / len(members)),
                    "n_queries": len(members),
                    "small_cell": len(members) < min_cell,
                }
            )
    return out


def landscape_gap(inside: float, outside: float) -> float | None:
    """(IN - OUT) / IN in percent; None when IN is 0."""
    return None if not inside else 100.0 * (inside - outside) / inside


def ipc_prefixes(codes: Iterable[str] | None, level: str) -> frozenset[str]:
    """The codes' prefixes at ``level`` (``subclass``: 4 characters, ``section``: 1)."""
    width = IPC_LEVELS[level]
    return frozenset(
        code.strip()[:width].upper() for code in codes or () if len(code.strip()) >= width
    )


def inscope(
    run: Mapping[str, list[tuple[str, float]]],
    query_ipc: Mapping[str, Iterable[str]],
    doc_ipc: Mapping[str, Iterable[str]],
    k: int = 10,
    level: str = "subclass",
) -> tuple[dict[str, float], int]:
    """Per-query InScope@k and how many queries were left out for having no IPC code."""
    scores: dict[str, float] = {}
    skipped = 0
    for query, results in run.items():
        mine = ipc_prefixes(query_ipc.get(query), level)
        if not mine:
            skipped += 1
            continue
        top = ranked(results)[:k]
        if not top:
            scores[query] = 0.0
            continue
        shared = sum(1 for doc in top if mine & ipc_prefixes(doc_ipc.get(doc), level))
        scores[query] = shared / k
    return scores, skipped


def rrf(
    runs: Iterable[Mapping[str, list[tuple[str, float]]]], k: int = RRF_K, depth: int | None = None
) -> dict[str, list[tuple[str, float]]]:
    """Reciprocal rank fusion of several runs (query -> [(doc, score)]), best first; the
    fused list is cut at ``depth`` when given."""
    fused: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for run in runs:
        for query, results in run.items():
            for rank, doc in enumerate(ranked(results), start=1):
                fused[query][doc] += 1.0 / (k + rank)
    out = {}
    for query, scores in fused.items():
        order = best_first(scores.items())
        out[query] = order[:depth] if depth else order
    return out


def family_split(families: Iterable[str], seed: int, test_share: float = 0.3) -> np.ndarray:
    """A boolean test mask from a seeded hash of each row's family (whole families only)."""
    buckets = 1000
    cut = round(test_share * buckets)
    return np.array(
        [zlib.crc32(f"{seed}:{family}".encode()) % buckets < cut for family in families],
        dtype=bool,
    )


def _normalised(embeddings: np.ndarray) -> np.ndarray:
    x = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def probe(
    embeddings: np.ndarray, labels: list[str], families: list[str], seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logistic-regression probe on a family-disjoint split: (test mask, truth, predicted)."""
    from sklearn.linear_model import LogisticRegression

    x, y = _normalised(embeddings), np.asarray(labels)
    test = family_split(families, seed)
    train = ~test
    if not test.any() or len(set(y[train])) < 2:
        raise ValueError(
            f"classification needs two labels in training and a test half: {int(train.sum())} "
            f"train rows with {len(set(y[train]))} labels, {int(test.sum())} test rows"
        )
    model = LogisticRegression(max_iter=2000, random_state=seed).fit(x[train], y[train])
    return test, y[test], model.predict(x[test])


def f1_scores(truth: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import f1_score

    return {
        "macro_f1": float(f1_score(truth, predicted, average="macro", zero_division=0)),
        "micro_f1": float(f1_score(truth, predicted, average="micro", zero_division=0)),
    }


def classification(
    embeddings: np.ndarray, labels: list[str], families: list[str], seed: int
) -> dict[str, float]:
    """Macro/micro F1 of the probe, with the split sizes and the number of labels."""
    test, truth, predicted = probe(embeddings, labels, families, seed)
    return {
        **f1_scores(truth, predicted),
        "train_rows": int((~test).sum()),
        "test_rows": int(test.sum()),
        "labels": len(set(labels)),
    }


def cluster_assignments(embeddings: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(_normalised(embeddings))


def v_measure(labels, assigned) -> dict[str, float]:
    from sklearn.metrics import homogeneity_completeness_v_measure

    homogeneity, completeness, v = homogeneity_completeness_v_measure(labels, assigned)
    return {
        "v_measure": float(v),
        "homogeneity": float(homogeneity),
        "completeness": float(completeness),
    }


def clustering(embeddings: np.ndarray, labels: list[str], seed: int) -> dict[str, float]:
    """k-means with k = number of labels held by at least two rows; V-measure, homogeneity,
    completeness. A label of one row is left out (``rows`` counts those kept): with every
    label its own cluster, k-means scores a perfect V-measure on any embeddings."""
    counts = Counter(labels)
    kept = np.array([counts[label] >= 2 for label in labels], dtype=bool)
    k = sum(n >= 2 for n in counts.values())
    if k < 2:
        raise ValueError(
            f"clustering needs at least two labels of two rows or more: {len(labels)} rows, "
            f"{len(counts)} labels, {k} of them with two rows or more"
        )
    kept_labels = [label for label, keep in zip(labels, kept, strict=True) if keep]
    assigned = cluster_assignments(np.asarray(embeddings)[kept], k, seed)
    return {
        **v_measure(kept_labels, assigned),
        "clusters": k,
        "rows": len(kept_labels),
        "left_out": len(labels) - len(kept_labels),
    }
