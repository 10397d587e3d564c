"""Issue 13's metrics against independent computations: hand-built InScope and RRF cases,
ranx's RRF, F1 and V-measure by hand from their definitions."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from ranx import Run, fuse

from evaluation.tasks import (
    cluster_assignments,
    clustering,
    f1_scores,
    family_split,
    inscope,
    probe,
    rrf,
    v_measure,
)


def test_inscope_by_hand_at_subclass_and_section():
    run = {
        "q1": [("d1", 0.9), ("d2", 0.8), ("d3", 0.7), ("d4", 0.6)],
        "q2": [("d1", 0.5)],
        "q3": [("d1", 0.5)],
    }
    query_ipc = {"q1": ["H01M10/05", "G06F3/01"], "q2": ["A61K9/00"], "q3": []}
    doc_ipc = {"d1": ["H01M2/10"], "d2": ["H01L21/00"], "d3": [], "d4": ["G06F17/30"]}
    subclass, skipped = inscope(run, query_ipc, doc_ipc, k=3, level="subclass")
    assert skipped == 1  # q3 has no IPC code
    assert subclass == {"q1": pytest.approx(1 / 3), "q2": 0.0}  # d4 is below the top 3
    section, _ = inscope(run, query_ipc, doc_ipc, k=3, level="section")
    assert section["q1"] == pytest.approx(2 / 3)  # d1 and d2 share section H; d3 has no code
    short, _ = inscope({"q1": [("d1", 1.0)]}, query_ipc, doc_ipc, k=10)
    assert short["q1"] == pytest.approx(0.1)  # fewer than k retrieved: the rest do not share


def test_rrf_by_hand_and_against_ranx():
    bm25 = {"q": [("a", 9.0), ("b", 7.0), ("c", 5.0)]}
    dense = {"q": [("c", 0.9), ("a", 0.8), ("d", 0.1)]}
    fused = dict(rrf([bm25, dense])["q"])
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62) and fused["d"] == pytest.approx(1 / 63)
    assert [doc for doc, _ in rrf([bm25, dense])["q"]] == ["a", "c", "b", "d"]

    rng = np.random.default_rng(5)
    runs = [
        {
            f"q{q}": [(f"d{d}", float(s)) for d, s in enumerate(rng.permutation(40))]
            for q in range(5)
        }
        for _ in range(3)
    ]
    ours = rrf(runs)
    oracle = fuse(
        [Run({q: dict(r) for q, r in run.items()}) for run in runs],
        method="rrf",
        params={"k": 60},
    ).to_dict()
    for query, results in ours.items():
        for doc, score in results:
            assert score == pytest.approx(oracle[query][doc], abs=1e-9)


def test_family_split_keeps_families_whole():
    families = [f"f{i % 17}" for i in range(200)]
    test = family_split(families, seed=3)
    by_family = {}
    for family, is_test in zip(families, test, strict=True):
        assert by_family.setdefault(family, is_test) == is_test
    assert 0 < test.sum() < len(families)
    assert (family_split(families, seed=3) == test).all()  # seeded: deterministic


def _blobs(n_per_label=30, labels=("A", "B", "C"), seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate(
        [np.eye(8)[i] + 0.05 * rng.standard_normal((n_per_label, 8)) for i in range(len(labels))]
    )
    y = [label for label in labels for _ in range(n_per_label)]
    families = [f"fam{i}" for i in range(len(y))]
    return x, y, families


def test_f1_against_its_definition():
    truth = np.array(["A", "A", "A", "B", "B", "C"])
    predicted = np.array(["A", "A", "B", "B", "C", "C"])
    per_label = []
    for label in "ABC":
        tp = sum(t == p == label for t, p in zip(truth, predicted, strict=True))
        fp = sum(p == label != t for t, p in zip(truth, predicted, strict=True))
        fn = sum(t == label != p for t, p in zip(truth, predicted, strict=True))
        per_label.append(2 * tp / (2 * tp + fp + fn))
    scores = f1_scores(truth, predicted)
    assert scores["macro_f1"] == pytest.approx(sum(per_label) / 3)
    assert scores["micro_f1"] == pytest.approx(4 / 6)  # single-label: micro-F1 = accuracy


def test_the_probe_separates_separable_labels_on_unseen_families():
    x, y, families = _blobs()
    test, truth, predicted = probe(x, y, families, seed=1)
    assert test.any() and (~test).any()
    assert (truth == predicted).all()


def _entropy(counts):
    n = sum(counts)
    return -sum(c / n * math.log(c / n) for c in counts if c)


def test_v_measure_against_its_definition():
    labels = ["A", "A", "A", "B", "B", "C", "C", "C"]
    assigned = [0, 0, 1, 1, 1, 2, 2, 0]
    n = len(labels)
    joint = Counter(zip(labels, assigned, strict=True))
    h_c, h_k = _entropy(Counter(labels).values()), _entropy(Counter(assigned).values())
    cluster_size, class_size = Counter(assigned), Counter(labels)
    h_c_given_k = -sum(m / n * math.log(m / cluster_size[k]) for (c, k), m in joint.items())
    h_k_given_c = -sum(m / n * math.log(m / class_size[c]) for (c, k), m in joint.items())
    homogeneity, completeness = 1 - h_c_given_k / h_c, 1 - h_k_given_c / h_k
    ours = v_measure(labels, assigned)
    assert ours["homogeneity"] == pytest.approx(homogeneity)
    assert ours["completeness"] == pytest.approx(completeness)
    assert ours["v_measure"] == pytest.approx(
        2 * homogeneity * completeness / (homogeneity + completeness)
    )


def test_clustering_recovers_separable_labels():
    x, y, _ = _blobs()
    assert clustering(x, y, seed=2)["v_measure"] == pytest.approx(1.0)
    assert len(set(cluster_assignments(x, 3, seed=2))) == 3
