"""Metrics agree with ranx; IPC-section macro and the 12-way overall by hand."""

import json
import random

import pytest
from ranx import Qrels, Run, evaluate

from evaluation import metrics
from evaluation.metrics import (
    aggregate,
    ranked,
    ranks_of_relevant,
    score_queries,
)


def random_case(seed):
    rng = random.Random(seed)
    docs = [f"d{i:03d}" for i in range(60)]
    run, qrels = {}, {}
    for q in range(40):
        qid = f"q{q}"
        # coarse scores create many ties; some queries retrieve none of their relevant docs
        run[qid] = [(d, float(rng.randint(0, 9))) for d in rng.sample(docs, rng.randint(5, 50))]
        qrels[qid] = set(rng.sample(docs, rng.randint(1, 6)))
    return run, qrels


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_metrics_agree_with_ranx_including_ties_and_misses(seed):
    run, qrels = random_case(seed)
    ours = score_queries(run, qrels, cutoffs=[1, 5, 10, 20])

    # ranx's tie order is unspecified; give it strictly decreasing scores in the TREC order
    # (-score, docid), while our function gets the tied scores and must break ties itself.
    def strict(results):
        order = sorted(results, key=lambda x: (-x[1], x[0]))
        return {d: float(len(order) - i) for i, (d, _) in enumerate(order)}

    ranx_run = Run({q: strict(r) for q, r in run.items()})
    ranx_qrels = Qrels({q: {d: 1 for d in rel} for q, rel in qrels.items()})
    qids = list(ranx_qrels.keys())
    names = {"hit@{k}": "hit_rate@{k}", "recall@{k}": "recall@{k}"}
    for k in (1, 5, 10, 20):
        for ours_name, ranx_name in names.items():
            theirs = evaluate(ranx_qrels, ranx_run, ranx_name.format(k=k), return_mean=False)
            mine = [ours[q][ours_name.format(k=k)] for q in qids]
            assert mine == pytest.approx(list(theirs), abs=1e-9)
    for ours_name, ranx_name in (("mrr", "mrr"), ("ndcg@10", "ndcg@10")):
        theirs = evaluate(ranx_qrels, ranx_run, ranx_name, return_mean=False)
        assert [ours[q][ours_name] for q in qids] == pytest.approx(list(theirs), abs=1e-9)
    assert any(v["mrr"] == 0 for v in ours.values())  # the case includes misses


def test_ties_are_broken_by_docid():
    assert ranked([("b", 1.0), ("a", 1.0), ("c", 2.0)]) == ["c", "a", "b"]
    assert ranks_of_relevant([("b", 1.0), ("a", 1.0), ("c", 2.0)], {"b", "c", "z"}) == [1, 3]


@pytest.mark.parametrize("seed", range(5))
def test_ranks_without_sorting_equal_the_ranks_of_the_sorted_run(seed):
    run, qrels = random_case(seed)  # many ties, misses, queries with no relevant doc found
    for qid, results in run.items():
        in_order = enumerate(ranked(results), start=1)
        assert ranks_of_relevant(results, qrels[qid]) == [
            rank for rank, doc in in_order if doc in qrels[qid]
        ]
    assert ranks_of_relevant([], {"a"}) == [] and ranks_of_relevant([("a", 1.0)], set()) == []


def test_ipc_section_macro_and_overall_by_hand():
    rows = []
    # zh/ABS: section A has hits 1, 0 (mean 0.5); section B has 1 (mean 1.0) -> macro 0.75, micro 2/3
    for section, hit in (("A", 1.0), ("A", 0.0), ("B", 1.0)):
        rows.append({"lang": "zh", "view": "ABS", "ipc_section": section, "hit@100": hit})
    # every other of the 12 language x view cells: one query in section C with hit 0
    cells = [
        (lang, view) for lang in ("zh", "en", "ja") for view in ("ABS", "CLAIM", "DESC", "TAC")
    ]
    for lang, view in cells[1:]:
        rows.append({"lang": lang, "view": view, "ipc_section": "C", "hit@100": 0.0})
    rows.append({"lang": "en", "view": "TAC", "ipc_section": "C", "hit@100": 1.0})  # en/TAC: 0.5
    out = {(r["lang"], r["view"], r["ipc_section"]): r for r in aggregate(rows, ["hit@100"])}
    assert out[("zh", "ABS", "A")]["value"] == 0.5
    assert out[("zh", "ABS", "MACRO")]["value"] == 0.75
    assert out[("zh", "ABS", "ALL")]["value"] == pytest.approx(2 / 3)
    assert out[("zh", "ALL", "MACRO")]["value"] == pytest.approx(0.75 / 4)
    assert out[("en", "ALL", "MACRO")]["value"] == pytest.approx(0.5 / 4)
    assert out[("ALL", "ALL", "MACRO")]["value"] == pytest.approx((0.75 + 0.5) / 12)
    # query views, as docs/TABLES.md says (they were 4 views and 12 cells)
    assert out[("zh", "ALL", "MACRO")]["n_queries"] == 3 + 1 + 1 + 1
    assert out[("ALL", "ALL", "MACRO")]["n_queries"] == len(rows) == 15
    assert (
        out[("zh", "ABS", "MACRO")]["metric"] == "hit" and out[("zh", "ABS", "MACRO")]["k"] == 100
    )


@pytest.mark.parametrize(
    "run_lines, qrels_lines, message",
    [
        # a NaN compares false with every score: the relevant document ranked first
        (["q1 Q0 d1 1 0.9 t", "q1 Q0 d2 2 nan t"], ["q1 0 d2 1"], r"run.trec:2: score is NaN"),
        # counted twice, d1 pushed d2 from rank 2 to 3 (trec_eval refuses such a run)
        (
            ["q1 Q0 d1 1 0.9 t", "q1 Q0 d1 2 0.8 t", "q1 Q0 d2 3 0.7 t"],
            ["q1 0 d2 1"],
            r"run.trec:2: document d1 is listed twice for query q1 \(also line 1\)",
        ),
        (["q1 Q0 d1 1 high t"], ["q1 0 d1 1"], r"run.trec:1: score 'high' is not a number"),
        (["q1 Q0 d1 1 0.9 t"], ["q1 0 d1 yes"], r"qrels.txt:1: relevance 'yes' is not a number"),
    ],
)
def test_trec_files_that_would_score_wrongly_are_refused_naming_the_line(
    run_lines, qrels_lines, message, tmp_path
):
    (tmp_path / "run.trec").write_text("\n".join(run_lines) + "\n")
    (tmp_path / "qrels.txt").write_text("\n".join(qrels_lines) + "\n")
    argv = ["--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.txt")]
    with pytest.raises(ValueError, match=message):
        metrics.main(argv)


def test_metrics_flags_and_query_meta_are_checked(tmp_path, capsys):
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 0.9 t\nq1 Q0 d2 2 0.8 t\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d2 1\n")
    (tmp_path / "meta.tsv").write_text("qid\tlang\tview\tipc_section\nq1\ten\n")
    files = ["--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.txt")]
    with pytest.raises(SystemExit) as usage:
        metrics.main([*files, "--k", "0,x"])
    assert usage.value.code == 2
    assert "argument --k: expected integers >= 1, got '0,x'" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"meta.tsv:2: expected 4 tab-separated fields"):
        metrics.main([*files, "--query-meta", str(tmp_path / "meta.tsv")])
    assert metrics.main([*files, "--k", "1,2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mean"]["hit@1"] == 0.0 and result["mean"]["hit@2"] == 1.0


def test_a_query_judged_only_non_relevant_scores_zero_as_in_trec_eval_and_ranx(tmp_path, capsys):
    """trec_eval (pytrec_eval-terrier 0.5.11's measures) and ranx both score such a query 0
    and count it in the mean (checked by hand against both; not called here: ranx's typed
    dicts compile for seconds in every worker). The command used to leave q2 out and average
    over q1 and q3 alone: 1/2 for each metric."""
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 0.9 t\nq2 Q0 d3 1 0.9 t\nq3 Q0 d5 1 0.9 t\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d3 0\nq3 0 d4 1\nq3 0 d5 0\n")
    files = ["--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.txt")]
    assert metrics.main([*files, "--k", "1,10"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["n_queries"] == 3
    # q1 finds its one relevant document first; q2 has none to find; q3 misses d4
    for name in ("hit@1", "hit@10", "recall@10", "mrr", "ndcg@10"):
        assert result["mean"][name] == pytest.approx(1 / 3, abs=1e-12), name
    assert "1 queries of --qrels have no relevant document (relevance > 0) and score 0" in err
    assert "e.g. ['q2']" in err


def test_a_written_run_scores_as_the_run_it_was_written_from(tmp_path):
    """evaluate writes each run as a TREC file and reports metrics from the run in memory;
    the README promises that ``evaluation.metrics`` scores those files the same way. With
    scores written to 6 decimals, two dense (float32 cosine) scores closer than 1e-6 became
    a tie that the docid then broke the other way: d9 (relevant) fell from rank 1 to 2."""
    import numpy as np

    scores = np.array([0.8123451, 0.8123449, 0.5, -2.5e-7, 1e-12], dtype=np.float32)
    run = {
        "q1": [(d, float(s)) for d, s in zip(["d9", "d1", "d2", "d3", "d4"], scores, strict=True)]
    }
    run["q2"] = [("d1", 12.345678901234), ("d2", 12.3456789), ("d3", 1e300), ("d4", -0.0)]
    qrels = {"q1": {"d9"}, "q2": {"d2"}}
    metrics.write_run(str(tmp_path / "run.trec"), run, "t")
    again = metrics.read_run(str(tmp_path / "run.trec"))
    assert {q: sorted(r) for q, r in again.items()} == {q: sorted(r) for q, r in run.items()}
    assert score_queries(again, qrels) == score_queries(run, qrels)
    assert score_queries(run, qrels)["q1"]["mrr"] == 1.0
    # the rank column is the (-score, docid) order of the scores as written
    for line in (tmp_path / "run.trec").read_text().splitlines():
        qid, _, doc, rank, _, _ = line.split()
        assert ranked(again[qid])[int(rank) - 1] == doc
