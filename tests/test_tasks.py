"""Issue 13's metrics against independent computations: hand-built InScope and RRF cases,
ranx's RRF, F1 and V-measure by hand from their definitions."""

from __future__ import annotations

import json
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


def test_clustering_leaves_out_labels_of_one_row():
    """With k = the number of labels, labels of one row each made every point its own
    cluster: V-measure 1.0 on random vectors (12 rows, 12 labels), 0.95 with 11 labels."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 16))
    for n_labels in (12, 11):
        with pytest.raises(ValueError, match="two labels of two rows or more"):
            clustering(x, [f"L{i % n_labels}" for i in range(12)], seed=7)
    # two labels of six rows and one of a single row: the single one is left out
    labels = ["A"] * 6 + ["B"] * 5 + ["C"]
    x, _, _ = _blobs()
    result = clustering(x[:12], labels, seed=2)
    assert (result["clusters"], result["rows"], result["left_out"]) == (2, 11, 1)


# --- evaluation wiring: strata, InScope rows, the paper's aggregation, hybrid, probe tasks ---


def _query(pn, view, section, year, country, codes, cited, lang="en"):
    return {
        "publication_number": pn,
        "family_id": f"F{pn}",
        "lang": lang,
        "view": view,
        "ipc_section": section,
        "x_cited": cited,
        "text": "q",
        "filing_year": year,
        "country_code": country,
        "ipc_codes": codes,
    }


def test_evaluate_results_writes_inscope_strata_and_landscape_rows(tmp_path):
    from evaluation.evaluate import evaluate_results

    queries = [
        _query("Q1", "ABS", "H", 2025, "CN", ["H01M10/05"], ["X1"]),
        _query("Q2", "ABS", "G", 2026, "US", ["G06F3/01"], ["X2"]),
        _query("Q1", "TITLE", "H", 2025, "CN", ["H01M10/05"], ["X1"]),
    ]
    doc_ipc = {"X1": ["H01M4/00"], "X2": ["H04L9/00"], "D": ["G06F17/00"]}
    found = {
        "Q1": [("X1", 0.9), ("D", 0.5)],  # X1 at rank 1 shares H01M; D shares nothing
        "Q2": [("D", 0.9), ("X2", 0.8)],  # D shares G06F; X2 at rank 2, section H only
    }
    results = {64: [found[q["publication_number"]] for q in queries]}
    per_query, rows = evaluate_results(
        results,
        queries,
        {},
        {"X1", "X2", "D"},
        [1, 2],
        tmp_path,
        "t",
        doc_ipc=doc_ipc,
        landscape=frozenset({"H"}),
        min_cell=2,
    )
    by_query = {(r["query_id"], r["view"]): r for r in per_query}
    assert by_query[("Q1", "ABS")]["inscope_subclass"] == pytest.approx(0.1)  # 1 of top 10
    assert by_query[("Q2", "ABS")]["inscope_subclass"] == pytest.approx(0.1)
    assert by_query[("Q2", "ABS")]["inscope_section"] == pytest.approx(0.1)  # D (G); X2 is H
    assert by_query[("Q1", "ABS")]["in_landscape"] is True
    assert by_query[("Q2", "ABS")]["in_landscape"] is False
    cell = {
        (r["task"], r["stratum"], r["view"], r["metric"], r["k"]): r
        for r in rows
        if r["stratum"] != "ALL"
    }
    inside = cell[("retrieval", "landscape=IN", "ALL", "hit", 1)]
    outside = cell[("retrieval", "landscape=OUT", "ALL", "hit", 1)]
    assert (inside["value"], inside["n_queries"], inside["small_cell"]) == (1.0, 2, False)
    assert (outside["value"], outside["n_queries"], outside["small_cell"]) == (0.0, 1, True)
    assert cell[("retrieval", "year=2026", "ABS", "hit", 2)]["value"] == 1.0
    assert cell[("retrieval", "country=CN", "TITLE", "mrr", 10)]["value"] == 1.0  # 10 deep
    assert cell[("inscope", "section=G", "ALL", "inscope_subclass", 10)]["value"] == 0.1
    # the paper's Overall (view ALL) averages its four views only: TITLE is left out of it
    overall = next(
        r
        for r in rows
        if r["task"] == "retrieval"
        and r["stratum"] == "ALL"
        and r["lang"] == "ALL"
        and r["metric"] == "hit"
        and r["k"] == 1
    )
    assert overall["value"] == pytest.approx(0.5)  # en-ABS: mean of sections G (0) and H (1)
    assert any(r["view"] == "TITLE" and r["lang"] == "en" for r in rows)


def test_a_cells_trec_run_and_qrels_reproduce_its_metrics(tmp_path, capsys):
    """A query whose list is empty after the family exclusion has no line in the TREC run:
    `evaluation.metrics` dropped it (1.0 over 1 query), and with qrels.txt and --complete it
    counted the other cell's queries too (0.25 over 4); eval/metrics says 0.5 over 2."""
    from evaluation import metrics
    from evaluation.evaluate import evaluate_results

    queries = [
        _query("Q1", "ABS", "H", 2025, "CN", [], ["X1"]),
        _query("Q2", "ABS", "H", 2025, "CN", [], ["X2"]),  # finds only its own family
        _query("Q3", "TAC", "H", 2025, "CN", [], ["X1"]),
        _query("Q4", "TAC", "H", 2025, "CN", [], ["X2"]),
    ]
    members = {"FQ2": ["Q2", "Q2B"]}
    found = {"Q1": [("X1", 0.9)], "Q2": [("Q2B", 0.9)], "Q3": [("D", 0.9)], "Q4": [("D", 0.9)]}
    results = {64: [found[q["publication_number"]] for q in queries]}
    _, rows = evaluate_results(
        results, queries, members, {"X1", "X2", "D", "Q2B"}, [1], tmp_path, "t"
    )
    cell = next(
        r
        for r in rows
        if (r["lang"], r["view"], r["ipc_section"], r["metric"], r["stratum"])
        == ("en", "ABS", "ALL", "hit", "ALL")
    )
    assert (cell["value"], cell["n_queries"]) == (0.5, 2)
    capsys.readouterr()
    run, qrels = str(tmp_path / "en_ABS_64.trec"), str(tmp_path / "en_ABS.qrels")
    assert metrics.main(["--run", run, "--qrels", qrels, "--k", "1", "--complete"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert (scored["mean"]["hit@1"], scored["n_queries"]) == (0.5, 2)


def test_no_query_with_an_x_citation_to_find_is_an_error(tmp_path):
    """With every X citation outside the collection, evaluate recorded a succeeded run with
    no metric rows, and only the report said later that eval/metrics had none."""
    from evaluation.evaluate import evaluate_results

    queries = [_query("Q1", "ABS", "H", 2025, "CN", [], ["X9"])]
    with pytest.raises(ValueError, match=r"none of the 1 query views .* 1 cite no patent"):
        evaluate_results({64: [[("D", 0.5)]]}, queries, {}, {"D"}, [1], tmp_path, "t")


def test_hybrid_fusion_is_rrf_of_the_two_lists():
    from evaluation.evaluate import fuse, model_kind

    assert model_kind("hybrid:models/xembed") == ("hybrid", "models/xembed")
    assert model_kind("bm25") == ("bm25", None)
    with pytest.raises(ValueError, match="hybrid:<model>"):
        model_kind("hybrid:")
    bm25 = [[("a", 9.0), ("b", 8.0)]]
    dense = [[("b", 0.9), ("c", 0.8)]]
    fused = fuse(bm25, dense, 10, [set()])[0]
    assert [d for d, _ in fused] == ["b", "a", "c"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    # the query's family is taken out before fusing: it held ranks, which lowered every
    # later document's fused score and could swap two documents
    bm25 = [[("F1", 9.0), ("F2", 8.0), ("A", 7.0), ("B", 6.0)]]
    dense = [[("B", 0.9), ("F1", 0.8), ("A", 0.7)]]
    fused = dict(fuse(bm25, dense, 10, [{"F1", "F2"}])[0])
    assert fused == pytest.approx({"A": 1 / 61 + 1 / 62, "B": 1 / 62 + 1 / 61})


def test_probe_tasks_rows_match_sklearn_on_the_same_split():
    import torch
    from sklearn.metrics import f1_score, v_measure_score

    from evaluation.evaluate import probe_tasks

    rng = np.random.default_rng(3)
    centers = {"A": np.eye(8)[0], "G": np.eye(8)[1], "H": np.eye(8)[2]}
    probe_rows, vectors = [], []
    for i in range(90):
        section = "AGH"[i % 3]
        probe_rows.append(
            {"id": f"P{i}", "family_id": f"F{i}", "section": section, "subclass": f"{section}01M"}
        )
        vectors.append(centers[section] + 0.05 * rng.standard_normal(8))
    ids = [r["id"] for r in probe_rows] + ["OTHER"]
    embeddings = torch.tensor(np.vstack([*vectors, np.ones(8)]), dtype=torch.float32)
    rows = probe_tasks(ids, embeddings, probe_rows, [8], {"classification", "clustering"}, 5)
    got = {(r["task"], r["stratum"], r["metric"]): r["value"] for r in rows}
    labels = [r["section"] for r in probe_rows]
    _, truth, predicted = probe(
        embeddings[:90].numpy(), labels, [r["family_id"] for r in probe_rows], 5
    )
    assert got[("classification", "label=section", "macro_f1")] == pytest.approx(
        f1_score(truth, predicted, average="macro")
    )
    assigned = cluster_assignments(embeddings[:90].numpy(), 3, 5)
    assert got[("clustering", "label=section", "v_measure")] == pytest.approx(
        v_measure_score(labels, assigned)
    )
    assert got[("clustering", "label=section", "v_measure")] > 0.9
    # one subclass per section here: the subclass rows equal the section rows
    assert got[("classification", "label=subclass", "micro_f1")] == pytest.approx(
        got[("classification", "label=section", "micro_f1")]
    )


def test_significance_overall_covers_the_paper_views_only():
    from evaluation.significance import compare

    a = {("Q1", "ABS"): ("en", "H", 0.0), ("Q2", "ABS"): ("en", "G", 1.0)}
    a[("Q1", "TITLE")] = ("en", "H", 0.0)
    b = {key: (lang, section, 1.0) for key, (lang, section, _) in a.items()}
    rows = {(r["lang"], r["view"]): r for r in compare(a, b, "hit", 100, 50, 0)}
    assert rows[("ALL", "ALL")]["n_queries"] == 2  # ABS only: TITLE is not in the paper's
    assert rows[("ALL", "ALL")]["diff"] == pytest.approx(0.5)
    assert rows[("en", "TITLE")]["n_queries"] == 1  # other types are tested per cell


def test_significance_means_are_the_metrics_tables_means():
    """A cell whose queries have no IPC section has no MACRO in eval/metrics and is left out
    of its language's and the Overall mean; the significance weights still divided by it,
    so value_a, value_b and diff were scaled down (0.5 against eval/metrics' 1.0 here)."""
    from evaluation.metrics import aggregate
    from evaluation.significance import compare

    a = {
        ("Q1", "ABS"): ("en", "H", 0.0),
        ("Q2", "ABS"): ("en", "G", 1.0),
        ("Q3", "CLAIM"): ("en", None, 0.0),  # no section: no MACRO for en/CLAIM
        ("Q4", "ABS"): ("zh", "A", 1.0),
    }
    b = {key: (lang, section, 1.0) for key, (lang, section, _) in a.items()}
    rows = {(r["lang"], r["view"]): r for r in compare(a, b, "hit", 100, 50, 0)}
    for values, column in ((a, "value_a"), (b, "value_b")):
        per_query = [
            {"lang": lang, "view": view, "ipc_section": section, "hit@100": value}
            for (_, view), (lang, section, value) in values.items()
        ]
        table = {
            (r["lang"], r["view"]): r["value"]
            for r in aggregate(per_query, ["hit@100"])
            if r["ipc_section"] == "MACRO"
        }
        for scope in (("en", "ALL"), ("zh", "ALL"), ("ALL", "ALL"), ("en", "ABS")):
            assert rows[scope][column] == pytest.approx(table[scope]), (scope, column)
    assert rows[("en", "ALL")]["diff"] == pytest.approx(0.5)
    assert rows[("ALL", "ALL")]["diff"] == pytest.approx(0.25)


def test_the_recipe_table_reads_each_task_and_the_p_value_against_the_base():
    import pandas as pd

    from evaluation.report import recipe_table

    def row(run, task, metric, k, value, stratum="ALL", section="MACRO"):
        return {
            "run_id": run,
            "name": run.split("@")[0],
            "dim": 64,
            "task": task,
            "lang": "ALL",
            "view": "ALL" if task != "classification" and task != "clustering" else "TAC",
            "ipc_section": section,
            "stratum": stratum,
            "metric": metric,
            "k": k,
            "value": value,
        }

    rows = []
    for run, shift in (("base@1", 0.0), ("r3@1", 0.1), ("r4-matched-r3@1", 0.05)):
        rows += [
            row(run, "retrieval", "ndcg", 10, 0.3 + shift),
            row(run, "retrieval", "hit", 100, 0.6 + shift),
            row(run, "retrieval", "ndcg", 10, 0.4 + shift, "landscape=IN", "ALL"),
            row(run, "retrieval", "ndcg", 10, 0.2 + shift, "landscape=OUT", "ALL"),
            row(run, "classification", "macro_f1", None, 0.5 + shift, "label=section", "ALL"),
            row(run, "clustering", "v_measure", None, 0.1 + shift, "label=subclass", "ALL"),
        ]
    significance = pd.DataFrame(
        [
            {
                "run_a": "base@1",
                "run_b": "r3@1",
                "dim": 64,
                "lang": "ALL",
                "view": "ALL",
                "metric": "ndcg",
                "k": 10,
                "p_value": 0.0123,
            }
        ]
    )
    table = recipe_table(
        pd.DataFrame(rows), significance, ["r3@1", "r4-matched-r3@1"], "base@1", 64
    )
    assert list(table.Model) == ["base", "r3", "r4-matched-r3"]
    r3 = table.set_index("Model").loc["r3"]
    assert r3["nDCG@10"] == "40.00" and r3["Hit@100"] == "70.00"
    assert r3["p nDCG@10 vs base"] == "0.0123" and r3["p Hit@100 vs base"] == ""
    assert r3["nDCG@10 IN"] == "50.00" and r3["nDCG@10 OUT"] == "30.00"
    assert r3["F1 section"] == "60.00" and r3["V subclass"] == "20.00"
    assert r3["F1 subclass"] == "–"  # not measured: shown as such (as in every table), not invented
