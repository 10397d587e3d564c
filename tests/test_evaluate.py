"""Evaluator: family exclusion, end to end on the generated sample (dense + BM25), report, SQL."""

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from deltalake import DeltaTable

from evaluation import evaluate, report, significance
from evaluation.evaluate import (
    StaleInputsError,
    evaluate_results,
    exclude_family,
    read_inputs,
)
from spark_jobs import prepare_evaluation


def test_a_family_member_ranked_first_is_removed_before_scoring(tmp_path):
    queries = [
        {
            "publication_number": "Q",
            "family_id": "FQ",
            "lang": "en",
            "view": "ABS",
            "ipc_section": "H",
            "x_cited": ["X1"],
            "text": "q",
        }
    ]
    members = {"FQ": ["Q", "Q-EP"], "FX": ["X1"]}
    found = [("Q-EP", 0.99), ("Q", 0.98), ("D1", 0.9), ("X1", 0.8)]
    assert exclude_family(found, {"Q", "Q-EP"}, 10) == [("D1", 0.9), ("X1", 0.8)]
    per_query, aggregated = evaluate_results(
        {64: [found]}, queries, members, {"Q", "Q-EP", "D1", "X1"}, [1, 2], tmp_path, "t"
    )
    assert per_query[0]["first_x_rank"] == 2 and per_query[0]["x_ranks"] == [2]
    overall = {(r["metric"], r["k"]): r["value"] for r in aggregated if r["lang"] == "ALL"}
    assert overall[("hit", 1)] == 0.0 and overall[("hit", 2)] == 1.0 and overall[("mrr", 10)] == 0.5
    # MRR is over the lists as searched, which --cutoffs sets: its row says how deep. It was
    # labelled uncut, so runs of other --cutoffs reported 0 and 1/150 under one name
    far = [(f"D{i}", 1 - i / 1000) for i in range(149)] + [("X1", 0.1)]
    (tmp_path / "far").mkdir()
    for cutoffs, expected in (([10, 100], 0.0), ([10, 200], 1 / 150)):
        collection = {"X1", *(d for d, _ in far)}
        _, rows = evaluate_results(
            {64: [far]}, queries, members, collection, cutoffs, tmp_path / "far", "t"
        )
        mrr = {r["k"]: r["value"] for r in rows if r["metric"] == "mrr" and r["lang"] == "ALL"}
        assert mrr == {cutoffs[-1]: pytest.approx(expected)}
    run = (tmp_path / "en_ABS_64.trec").read_text().split("\n")[0].split()
    assert run == ["Q|ABS", "Q0", "D1", "1", "0.9", "t"]
    # cutoffs below 10: the results still go 10 deep, as nDCG@10 (and InScope@10) read them
    deeper = [*found[:3], *[(f"D{i}", 0.85 - i / 100) for i in range(2, 6)], ("X1", 0.5)]
    per_query, aggregated = evaluate_results(
        {64: [deeper]}, queries, members, {d for d, _ in deeper}, [1, 2], tmp_path, "t"
    )
    assert per_query[0]["x_ranks"] == [6]
    overall = {(r["metric"], r["k"]): r["value"] for r in aggregated if r["lang"] == "ALL"}
    assert overall[("ndcg", 10)] == pytest.approx(1 / math.log2(7))


def _evaluate(lake_uri: str, inputs: str, model: str, name: str, *extra: str) -> None:
    """One evaluation run ``e2e-<name>`` at cutoffs 10, 20, 100."""
    argv = ["--lake", lake_uri, "--inputs", inputs, "--model", model, "--name", name]
    argv += ["--run-id", f"e2e-{name}", "--cutoffs", "10,20,100", *extra]
    assert evaluate.main(argv) == 0


@pytest.mark.spark
@pytest.mark.integration
def test_dense_ties_at_the_search_depth_go_by_docid_not_by_the_collection_file(tmp_path):
    """FAISS keeps the lowest rows among scores tied at the cut: with 14 identical TACs, the
    X citation was in the top 10 or not depending on where Spark had written it."""
    import zlib

    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    from evaluation.evaluate import search_dense

    class Encoder:  # deterministic text -> unit vector
        dim = 8

        def _vectors(self, texts):
            rows = [np.random.default_rng(zlib.crc32(t.encode())).normal(size=8) for t in texts]
            return torch.nn.functional.normalize(torch.tensor(np.array(rows)).float(), dim=-1)

        def encode_passage(self, texts, batch_size=32):
            return self._vectors(texts)

        def encode_query(self, texts, langs=None, batch_size=32):
            return self._vectors(texts)

    ids = [f"US{i:04d}" for i in range(14)] + [f"EP{i:04d}" for i in range(20)]
    text = {d: "same title and abstract" if d < "UT" and d > "US" else f"other {d}" for d in ids}
    query = {"lang": "en", "text": "same title and abstract"}
    found = []
    for name, order in (
        ("sorted", ids),
        ("x_last", [d for d in ids if d != "US0005"] + ["US0005"]),
    ):
        folder = tmp_path / name
        folder.mkdir()
        pq.write_table(
            pa.table({"id": order, "text": [text[d] for d in order]}), folder / "c.parquet"
        )
        found.append(
            sorted(d for d, _ in search_dense(Encoder(), folder, [query], [None], 10, 32)[8][0])
        )
    assert found[0] == found[1] == [f"US{i:04d}" for i in range(10)]


def test_significance_tests_mrr_at_the_depth_both_runs_searched():
    """A run searched 200 deep found the first X at rank 150; one searched 100 deep did not
    see it. MRR compares them at 100, the depth both hold."""
    rows = [{"query_id": "Q", "view": "ABS", "lang": "en", "ipc_section": "H", "x_ranks": [150],
             "n_x": 1}]  # fmt: skip
    assert significance.per_query_values(rows, "mrr", 100) == {("Q", "ABS"): ("en", "H", 0.0)}
    assert significance.per_query_values(rows, "mrr", 200)[("Q", "ABS")][2] == 1 / 150


@pytest.mark.spark
def test_a_run_of_cutoffs_below_10_searched_10_deep(spark, tmp_path):
    """evaluate searches at least 10 deep (nDCG@10, MRR@10): significance took the largest
    Hit cutoff (5) for the depth, tested MRR at 5 and refused nDCG@10."""
    from lake import write_table
    from schemas import table

    def row(metric, k):
        return ("r5", "m", "retrieval", "ALL", "ALL", 64, "MACRO", "ALL", metric, k, 0.5, 3)

    columns = table("eval/metrics").spark_schema()
    rows = [row("hit", 1), row("hit", 5), row("mrr", 10), row("ndcg", 10)]
    frame = spark.createDataFrame(
        [(*r, *([None] * (len(columns.fields) - len(r)))) for r in rows], columns
    )
    lake = str(tmp_path / "lake")
    write_table(spark, frame, lake, "eval/metrics")
    assert significance.searched_depth(spark, lake, ["r5"]) == {"r5": 10}


def test_end_to_end_on_a_file_uri_lake_tables_report_significance_and_sql(
    spark, pipeline, tmp_path, monkeypatch, capsys
):
    _, _, lake, _ = pipeline
    lake_uri = Path(lake).as_uri()  # file:///...: evaluation works on any Spark URI
    inputs = (tmp_path / "eval-inputs").as_uri()
    manifest = prepare_evaluation.run(spark, lake_uri, inputs)
    # a folder prepared again is another manifest (evaluate's cache key of remote inputs)
    prepared = DeltaTable(f"{lake}/meta/job_runs").to_pandas()
    prepared = prepared[prepared.job == "prepare_evaluation"].run_id
    assert manifest["run_id"] in set(prepared) and manifest["probe"]["seed"] == 7
    queries = DeltaTable(f"{lake}/silver/eval_queries").to_pandas()
    assert manifest["query_patents"] == queries.publication_number.nunique()
    patents = DeltaTable(f"{lake}/silver/patents").to_pandas()
    assert 0.9 * len(patents) <= manifest["collection"] <= len(patents)
    _evaluate(
        lake_uri,
        inputs,
        "builtin:qwen3-tiny",
        "base",
        "--max-length",
        "128",
        "--query-types",
        "all",
        "--landscape",
        "G,H",
    )
    # three models in one process: each its own run id from the {name} template
    models = ["hybrid:builtin:qwen3-tiny", "bm25", "builtin:qwen3-tiny"]
    argv = ["--lake", lake_uri, "--inputs", inputs, "--model", *models]
    argv += ["--name", "hybrid", "bm25", "dense", "--run-id", "e2e-{name}"]
    argv += ["--cutoffs", "10,20,100", "--max-length", "128", "--dims", "64"]
    argv += ["--tasks", "retrieval,inscope"]
    before = {t: DeltaTable(f"{lake}/eval/{t}").version() for t in ("runs", "per_query", "metrics")}
    calls = {"inputs": 0, "bm25": 0, "dense": 0}

    def counted(name, function):
        def call(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return call

    monkeypatch.setattr(evaluate, "read_inputs", counted("inputs", evaluate.read_inputs))
    monkeypatch.setattr(evaluate, "search_bm25", counted("bm25", evaluate.search_bm25))
    monkeypatch.setattr(evaluate, "search_dense", counted("dense", evaluate.search_dense))
    assert evaluate.main(argv) == 0
    # what the models share is done once: the hybrid's BM25 and dense lists are bm25's and
    # the dense model's
    assert calls == {"inputs": 1, "bm25": 1, "dense": 1}
    monkeypatch.undo()
    # one commit per eval table for both models, each model still its own recorded run
    assert {t: DeltaTable(f"{lake}/eval/{t}").version() - v for t, v in before.items()} == {
        "runs": 1,
        "per_query": 1,
        "metrics": 1,
    }
    logged = DeltaTable(f"{lake}/meta/job_runs").to_pandas()
    logged = logged[logged.run_id.isin(["e2e-hybrid", "e2e-bm25", "e2e-dense"])]
    assert sorted(zip(logged.run_id, logged.status, strict=True)) == [
        ("e2e-bm25", "succeeded"),
        ("e2e-dense", "succeeded"),
        ("e2e-hybrid", "succeeded"),
    ]
    with pytest.raises(SystemExit):  # several models need a {name} template
        evaluate.main([arg.replace("e2e-{name}", "e2e-fixed") for arg in argv])
    runs = DeltaTable(f"{lake}/eval/runs").to_pandas().set_index("run_id")
    # both runs record the table versions their shared inputs were prepared from
    assert runs.loc["e2e-base", "data_versions"] == runs.loc["e2e-bm25", "data_versions"]
    assert dict(runs.loc["e2e-bm25", "data_versions"]) == manifest["delta_versions"]
    assert list(runs.loc["e2e-base", "dims"]) == [64, 128] and list(
        runs.loc["e2e-bm25", "dims"]
    ) == [0]
    metrics = DeltaTable(f"{lake}/eval/metrics").to_pandas()
    overall = metrics[(metrics.lang == "ALL") & (metrics.view == "ALL") & (metrics.metric == "hit")]
    assert set(overall.run_id) == {"e2e-base", "e2e-bm25", "e2e-hybrid", "e2e-dense"}
    assert ((overall.value >= 0) & (overall.value <= 1)).all()
    per_query = DeltaTable(f"{lake}/eval/per_query").to_pandas()
    queries = DeltaTable(f"{lake}/silver/eval_queries").to_pandas()
    assert set(per_query.query_id) <= set(queries.publication_number)
    assert set(per_query[per_query.run_id == "e2e-bm25"].view) == {"ABS", "CLAIM", "DESC", "TAC"}
    base_types = set(per_query[per_query.run_id == "e2e-base"].view)
    assert {"TITLE", "TA", "FIC", "ICLAIMS", "DESC1", "TACD", "CODES", "SUMMARY"} <= base_types
    tasks_of = metrics.groupby("run_id").task.agg(set)
    assert tasks_of["e2e-base"] == {"retrieval", "inscope", "classification", "clustering"}
    assert tasks_of["e2e-hybrid"] == {"retrieval", "inscope"}
    base = metrics[metrics.run_id == "e2e-base"]
    strata = base[
        (base.task == "retrieval")
        & (base.stratum != "ALL")
        & (base.view == "ALL")
        & (base.dim == 64)
    ]
    hit100 = strata[(strata.metric == "hit") & (strata.k == 100)].set_index("stratum")
    landscape = hit100.loc[["landscape=IN", "landscape=OUT"]]
    base_pq = per_query[(per_query.run_id == "e2e-base") & (per_query.dim == 64)]
    assert landscape.n_queries.sum() == len(base_pq)  # every query view is IN or OUT
    assert int(landscape.n_queries["landscape=IN"]) == int(base_pq.in_landscape.sum())
    for key in ("year=", "section=", "country=", "lang="):
        cells = hit100[hit100.index.str.startswith(key)]
        assert cells.n_queries.sum() == len(base_pq), key
        assert (cells.small_cell == (cells.n_queries < 10)).all()
    # a stratum cell is the mean over its query views, recomputed from eval/per_query
    cn = base_pq[base_pq.country_code == "CN"]
    hit = cn.first_x_rank.fillna(10**6).le(100).mean()
    assert float(hit100.loc["country=CN", "value"]) == pytest.approx(hit)
    probes = base[base.task.isin(["classification", "clustering"])]
    assert set(probes.metric) == {
        "macro_f1",
        "micro_f1",
        "v_measure",
        "homogeneity",
        "completeness",
    }
    assert set(probes.stratum) == {"label=section", "label=subclass"}
    assert ((probes.value >= 0) & (probes.value <= 1)).all()
    inscope = base[(base.task == "inscope") & (base.stratum == "ALL")]
    assert {"inscope_subclass", "inscope_section"} == set(inscope.metric)
    # the metrics CLI scores the TREC files the same way as the tables
    run_dir = Path(lake) / "runs" / "e2e-bm25"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluation.metrics",
            "--run",
            str(run_dir / "en_TAC_0.trec"),
            "--qrels",
            str(run_dir / "qrels.txt"),
            "--k",
            "10,100",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    scored = json.loads(out.stdout)
    mean = scored["mean"]
    cell = metrics[
        (metrics.run_id == "e2e-bm25")
        & (metrics.lang == "en")
        & (metrics.view == "TAC")
        & (metrics.ipc_section == "ALL")
        & (metrics.metric == "hit")
        & (metrics.k == 100)
    ]
    assert mean["hit@100"] == pytest.approx(float(cell.value.iloc[0]))
    assert scored["n_queries"] == int(cell.n_queries.iloc[0])
    # --complete counts every query view of the qrels, those outside this file as misses
    complete = subprocess.run([*out.args, "--complete"], capture_output=True, text=True, check=True)
    qrels_ids = {line.split()[0] for line in (run_dir / "qrels.txt").read_text().splitlines()}
    assert json.loads(complete.stdout)["n_queries"] == len(qrels_ids) > scored["n_queries"]

    assert (
        significance.main(
            ["--lake", lake_uri, "--a", "e2e-bm25", "--b", "e2e-base", "--permutations", "200"]
        )
        == 0
    )
    sig = DeltaTable(f"{lake}/eval/significance").to_pandas()
    assert ((sig.p_value > 0) & (sig.p_value <= 1)).all() and "ALL" in set(sig.lang)
    # e2e-bm25 searched 100 deep (--cutoffs 10,20,100): hit@200 would have been its hit@100
    with pytest.raises(SystemExit):
        significance.main(["--lake", lake_uri, "--a", "e2e-bm25", "--b", "e2e-base", "--k", "200"])
    assert "run 'e2e-bm25' searched 100 deep" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a name, not a run id: the lake's runs are named
        significance.main(["--lake", lake_uri, "--a", "e2e", "--b", "e2e-base"])
    assert "no rows for run 'e2e'; the lake's runs: e2e-base, e2e-bm25" in capsys.readouterr().err
    assert DeltaTable(f"{lake}/eval/significance").to_pandas().k.max() == 100  # nothing written
    summary = report.summary_table(
        metrics, sig, ["e2e-bm25", "e2e-base"], 64, "e2e-bm25", "e2e-base"
    )
    p_row = next(line for line in summary.splitlines() if "p (e2e-base vs e2e-bm25)" in line)
    overall_p = sig[(sig.lang == "ALL") & (sig.view == "ALL")].p_value.iloc[0]
    assert p_row.rstrip(" |").endswith(f"{overall_p:.4f}")
    # several pairs and metrics in one process: the same rows as one call per comparison,
    # and a rerun replaces them
    hit_before = sig.sort_values(["lang", "view"]).p_value.tolist()
    for _ in range(2):
        assert (
            significance.main(
                [
                    "--lake", lake_uri, "--pair", "e2e-bm25:e2e-base", "--pair",
                    "e2e-bm25:e2e-hybrid", "--metric", "ndcg,hit,mrr", "--permutations", "200",
                ]
            )
            == 0
        )  # fmt: skip
    both = DeltaTable(f"{lake}/eval/significance").to_pandas()
    per_test = both.groupby(["run_b", "metric", "k"], dropna=False).size()
    assert set(per_test.index) == {
        ("e2e-base", "hit", 100), ("e2e-base", "ndcg", 10), ("e2e-base", "mrr", 100),
        ("e2e-hybrid", "hit", 100), ("e2e-hybrid", "ndcg", 10), ("e2e-hybrid", "mrr", 100),
    }  # fmt: skip
    assert per_test.nunique() == 1  # each comparison has every lang x view row, once
    again = both[(both.run_b == "e2e-base") & (both.metric == "hit")]
    assert again.sort_values(["lang", "view"]).p_value.tolist() == hit_before

    path = report.build(
        lake_uri,
        ["e2e-bm25", "e2e-base", "e2e-hybrid"],
        tmp_path / "report",
        dim=64,
        compare=("e2e-bm25", "e2e-base"),
    )
    text = path.read_text()
    assert "Table 2" in text and "Table 4" in text and "Paired randomization" in text
    for section in (
        "Query types",
        "Strata by country",
        "InScope@10",
        "Classification",
        "landscape",
    ):
        assert section in text, section
    for figure in ("fig4_query_types.png", "fig5_landscape.png"):
        assert (tmp_path / "report" / figure).stat().st_size > 1000
    assert (tmp_path / "report" / "fig3_macro_hit_at_k.png").stat().st_size > 1000
    assert (tmp_path / "report" / "report.html").read_text().count("<table>") >= 4

    sql = subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_jobs.sql",
            "--lake",
            lake,
            "-e",
            "SELECT count(*) FROM eval_metrics WHERE run_id = 'e2e-bm25'",
        ],
        capture_output=True,
        text=True,
    )
    assert sql.returncode == 0, sql.stderr[-2000:]
    count = int(sql.stdout.strip().splitlines()[-1])
    assert count == len(metrics[metrics.run_id == "e2e-bm25"])

    # e2e-base as if evaluated after prepare_evaluation ran again (other queries, relevance or
    # collection): the paired test paired its queries with bm25's, the report set them side
    # by side; both refuse, naming the table
    spark.sql(
        f"UPDATE delta.`{lake}/eval/runs` SET data_versions = transform_values(data_versions, "
        "(name, v) -> IF(name = 'silver/eval_queries', v + 1, v)) WHERE run_id = 'e2e-base'"
    )
    with pytest.raises(SystemExit):
        significance.main(["--lake", lake_uri, "--a", "e2e-bm25", "--b", "e2e-base"])
    assert re.search(
        r"runs e2e-bm25 and e2e-base were evaluated on different table versions "
        r"\(silver/eval_queries v\d+ / v\d+\)",
        capsys.readouterr().err,
    )
    with pytest.raises(ValueError, match=r"e2e-base were evaluated on different table versions"):
        report.build(lake_uri, ["e2e-bm25", "e2e-base"], tmp_path / "mixed")


@pytest.mark.spark
def test_evaluation_refuses_missing_or_stale_inputs(spark, pipeline, tmp_path):
    _, _, lake, _ = pipeline
    with pytest.raises(FileNotFoundError, match="prepare_evaluation"):
        read_inputs(spark, lake, str(tmp_path), tmp_path / "cache")
    current = DeltaTable(f"{lake}/silver/views").version()
    manifest = {"delta_versions": {"silver/views": current + 7}}
    (tmp_path / "_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(
        StaleInputsError, match=f"silver/views v{current + 7} \\(lake: v{current}\\)"
    ):
        read_inputs(spark, lake, str(tmp_path), tmp_path / "cache")
    # another lake built by the same pipeline: the same versions, written by other runs
    manifest = {"delta_versions": {"silver/views": current}, "delta_runs": {"silver/views": "x"}}
    (tmp_path / "_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(
        StaleInputsError, match=rf"silver/views v{current} of run x \(lake: v{current} of run "
    ):
        read_inputs(spark, lake, str(tmp_path), tmp_path / "cache")


@pytest.mark.spark
def test_a_model_trained_before_the_split_grew_is_refused(spark, tmp_path):
    """A model's registry names the exclusions its data was audited against; evaluation
    queries from a family they missed (a later split) are refused, along the parent chain."""
    from evaluation.heldout import EXCLUDED, NotHeldOutError, check_held_out
    from lake import write_table
    from schemas import table

    lake = str(tmp_path / "lake")
    from lake.snapshots import tag

    def split(lake, families, run):
        frame = spark.createDataFrame(
            [(f, [f"{f}-1-A"]) for f in families], table(EXCLUDED).spark_schema()
        )
        return write_table(spark, frame, lake, EXCLUDED, user_metadata=tag(run))

    # the split before and after it grew
    versions = [split(lake, ["F1"], "split-1"), split(lake, ["F1", "F2"], "split-2")]

    def model(name, version, parent=None, trained_on=lake, run=None):
        folder = tmp_path / name
        folder.mkdir()
        row = {
            "model_id": name,
            "output_path": str(folder),
            "parent_model": parent,
            "data_versions": {EXCLUDED: version, "gold/stage2_examples": 3},
            "config_json": json.dumps({"training": {"lake": trained_on}}),
            **({"data_runs": {EXCLUDED: run}} if run else {}),
        }
        (folder / "registry.json").write_text(json.dumps(row))
        return str(folder)

    notes = []
    stage1 = model("s1", versions[0])
    stage2 = model("s2", versions[1], parent=stage1)
    with pytest.raises(
        NotHeldOutError, match=r"'s1' .* did not exclude 1 of the 2 .*\(e\.g\. F2\)"
    ):
        check_held_out(spark, lake, stage2, versions[1], {"F1", "F2"}, notes.append)
    check_held_out(spark, lake, stage2, versions[1], {"F1"}, notes.append)  # F1 was excluded
    check_held_out(spark, lake, model("s1-again", versions[1]), versions[1], {"F1", "F2"})
    check_held_out(spark, lake, str(tmp_path), versions[1], {"F2"})  # no registry: a base model
    elsewhere = model("other", 0, trained_on=str(tmp_path / "gone"))
    check_held_out(spark, lake, elsewhere, versions[1], {"F2"}, notes.append)
    # a parent recorded relative to where it trained is not found from here: said, not skipped
    moved = model("s2-moved", versions[1], parent="models/s1-relative")
    check_held_out(spark, lake, moved, versions[1], {"F1", "F2"}, notes.append)
    # the version number alone passed: a lake rebuilt at the same path (here: another lake
    # whose split excluded other families) numbers its versions from 0 again
    rebuilt = str(tmp_path / "rebuilt")
    split(rebuilt, ["F9"], "split-old")
    split(rebuilt, ["F9", "F8"], "split-old-2")
    shutil.rmtree(rebuilt)
    assert [split(rebuilt, f, r) for f, r in ((["F1"], "new-1"), (["F1", "F2"], "new-2"))] == [
        *versions
    ]
    same_runs = model("s-same", versions[1], trained_on=rebuilt, run="new-2")
    check_held_out(spark, rebuilt, same_runs, versions[1], {"F1", "F2"}, notes.append)
    before = model("s-before", versions[1], trained_on=rebuilt, run="split-old-2")
    check_held_out(spark, rebuilt, before, versions[1], {"F1", "F2"}, notes.append)
    gone = model("s-gone", 7, trained_on=rebuilt, run="split-7")  # a version the log lacks
    check_held_out(spark, rebuilt, gone, versions[1], {"F1", "F2"}, notes.append)
    assert notes == [
        f"held-out check: 'other' ({elsewhere}) trained on {tmp_path / 'gone'}, "
        "which is not readable; not checked",
        "held-out check: the parent model 'models/s1-relative' of 's2-moved' is not found "
        f"from {Path.cwd()}; its training data is not checked (pass its folder as an absolute "
        "path when training, or evaluate from where it trained)",
        f"held-out check: 's-before' ({tmp_path / 's-before'}) trained on {EXCLUDED} version "
        f"{versions[1]} of run split-old-2; that version of {rebuilt} is now run new-2's (the "
        "lake was rebuilt): not checked",
        f"held-out check: 's-gone' ({tmp_path / 's-gone'}) trained on {EXCLUDED} version 7 of "
        f"run split-7; that version of {rebuilt} is no longer in its log (the lake was "
        "rebuilt): not checked",
    ]


def macro_hit(run: str, k: int, lang: str, value: float, view: str = "ALL") -> dict:
    """One eval/metrics row: the IPC-section macro Hit@k of ``run`` (64 dims)."""
    return {"run_id": run, "name": run, "task": "retrieval", "stratum": "ALL", "dim": 64} | {
        "ipc_section": "MACRO",
        "metric": "hit",
        "k": k,
        "lang": lang,
        "view": view,
        "value": value,
    }


def test_the_report_names_a_run_without_hit_at_100(tmp_path, monkeypatch):
    """A run evaluated with --cutoffs 10,20 failed the report with pandas' "None of
    [Index(['ALL'], ...)] are in the [columns]" (the DAG's last task, after the pipeline)."""
    import pandas as pd

    rows = [
        macro_hit(run, k, lang, 0.5, view)
        for run, cutoffs in (("a", (10, 100)), ("b", (10, 20)))
        for k in cutoffs
        for lang in ("en", "ALL")
        for view in ("ABS", "ALL")
    ]
    tables = {"eval/metrics": pd.DataFrame(rows)}
    monkeypatch.setattr(report, "load", lambda lake, name: tables.get(name, pd.DataFrame()))
    with pytest.raises(ValueError, match=r"run\(s\) b \(hit at \[10, 20\]\) have no Hit@100"):
        report.build("lake", ["a", "b"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_report_shows_every_language_of_the_corpus():
    """Tables 2 and 4 kept only zh/en/ja columns: a corpus in de and ko (any ISO 639-1 code is
    accepted from ingest on) lost those languages' rows from the report without a word."""
    import pandas as pd

    rows = [
        macro_hit(run, k, lang, value)
        for run in ("a", "b")
        for k in (10, 20, 100)
        for lang, value in (("ko", 0.25), ("en", 0.5), ("de", 0.75), ("ALL", 0.5))
    ]
    metrics = pd.DataFrame(rows)
    overall = report.table2(report.macro(metrics, ["a", "b"], 64, "hit", 100))
    assert list(overall.columns) == ["Model", "EN", "DE", "KO", "Overall"]
    assert list(overall.DE) == [0.75, 0.75]
    paired = report.table4(metrics, "a", "b", 64)
    assert list(paired.Language) == ["EN", "DE", "KO", "Overall"] * 2
    assert list(paired.A[paired.Language == "KO"]) == [0.25, 0.25]


@pytest.mark.parametrize(
    "runs, compare, message",
    [
        # a run outside --runs failed with "report: 'c'" (a KeyError in Figure 2); with one
        # run in --runs, --compare was ignored and the run compared with itself
        ("a,b", "a,c", "--compare names c, not among --runs (a, b): add it to --runs"),
        ("a", "a,b", "--compare names b, not among --runs (a)"),
        # one name failed with "not enough values to unpack (expected 2, got 1)"
        ("a,b", "b", "--compare takes two run ids A,B, got 'b'"),
        ("a,b", "a,b,c", "--compare takes two run ids A,B, got 'a,b,c'"),
        (",", None, "--runs names no run id: ','"),
    ],
)
def test_report_flags_that_name_no_comparable_runs_are_refused_before_spark(
    runs, compare, message, capsys, monkeypatch
):
    def no_spark(*_):
        raise AssertionError("Spark started before the flags were checked")

    monkeypatch.setattr(report, "build_session", no_spark)
    argv = ["--lake", "lake", "--out", "out", "--runs", runs]
    with pytest.raises(SystemExit) as exit_:
        report.main(argv + (["--compare", compare] if compare else []))
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert report.compared_runs(["a"], None) == ("a", "a")
    assert report.compared_runs(["a", "b", "c"], None) == ("b", "c")
    assert report.parse_compare(" a , b", ["a", "b"]) == ("a", "b")


def test_report_on_a_lake_with_no_evaluation_says_so(spark, tmp_path, capsys):
    """A mistyped --lake said "eval/metrics has no rows for run(s) [...]", as if the runs were
    misnamed; a folder that does not exist is now refused before Spark starts."""
    with pytest.raises(SystemExit) as exit_:
        report.main(["--lake", str(tmp_path / "nope"), "--out", str(tmp_path), "--runs", "a"])
    assert exit_.value.code == 2 and "no lake at" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"holds no evaluation \(eval/metrics has no rows\)"):
        report.build(str(tmp_path), ["a"], tmp_path / "out")


def test_a_landscape_that_holds_no_query_keeps_its_row_in_the_landscape_table():
    """A run evaluated with --landscape D,G on a corpus with no D or G query had only
    landscape=OUT rows, and the report left the IN vs OUT section out without a word."""
    import pandas as pd

    def row(run, stratum, value, n):
        return macro_hit(run, 100, "ALL", value) | {"stratum": stratum, "n_queries": n}

    metrics = pd.DataFrame(
        [
            row("a", "landscape=OUT", 0.75, 108),
            row("b", "landscape=IN", 0.5, 10),
            row("b", "landscape=OUT", 0.25, 98),
            row("c", "ALL", 0.5, 108),  # evaluated without a landscape: no row
        ]
    )
    table = report.landscape_table(metrics, ["a", "b", "c"], 64)
    assert list(table.Model) == ["a", "b"]
    assert report._fmt(table).splitlines()[2:] == [
        "| a | – | 75.00 | n/a | 0 | 108 |",
        "| b | 50.00 | 25.00 | 50.0 | 10 | 98 |",
    ]


def test_table4_names_a_cutoff_one_run_was_not_evaluated_at():
    """Run b evaluated with --cutoffs 10,100 (no 20) made Table 4 fail with an IndexError, and
    its heading promised Hit@20 whatever the runs held."""
    import pandas as pd

    rows = [
        macro_hit(run, k, lang, value)
        for run, cutoffs in (("a", (10, 20, 100)), ("b", (10, 100)))
        for k in cutoffs
        for lang, value in (("en", 0.5), ("ALL", 0.5))
        if not (run == "b" and lang == "en" and k == 10)  # a language only run a has
    ]
    paired = report.table4(pd.DataFrame(rows), "a", "b", 64)
    assert list(paired.K) == [10, 10] and list(paired.Language) == ["EN", "Overall"]
    assert "| 10 | EN | 50.00 | – | – |" in report._fmt(paired)
    title = report.table4_title(paired, "a", "b")
    assert title.endswith("; Hit@20 not shown: evaluate both runs with 20 among --cutoffs")
    assert "not shown" not in report.table4_title(
        report.table4(pd.DataFrame(rows), "a", "a", 64), "a", "a"
    )


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--cutoffs", "0,abc", "expected integers >= 1, got '0,abc'"),
        ("--dims", "-5", "expected integers >= 1 or 'full', got '-5'"),
        ("--query-types", "ABS,FOO", "unknown ['FOO']; known: ABS, CLAIM"),
        ("--tasks", "nope", "unknown ['nope']; choose from retrieval"),
        ("--batch-size", "0", "must be >= 1, got 0"),
    ],
)
def test_bad_evaluation_flags_are_usage_errors_before_spark_starts(flag, value, message, capsys):
    """Before, these started Spark and failed later (`--cutoffs 0,abc`: "invalid literal
    for int()"), or not at all (`--dims -5` scored all but the last five dims)."""
    argv = ["--lake", "/nonexistent", "--inputs", "/nonexistent", "--model", "bm25"]
    with pytest.raises(SystemExit) as exit_:
        evaluate.main([*argv, "--name", "x", flag, value])
    assert exit_.value.code == 2
    assert f"argument {flag}: {message}" in capsys.readouterr().err


def test_a_dim_wider_than_the_model_is_refused_not_labelled_as_that_dim(tmp_path):
    """A prefix wider than the vector is the whole vector: `--dims 512` on a 384-dim model
    scored the full vectors and labelled the rows 512."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    class EightDims:  # only the vector width matters to the check
        dim = 8

        def encode_passage(self, texts, batch_size):
            return torch.ones(len(texts), 8)

        def encode_query(self, texts, langs, batch_size):
            return torch.ones(len(texts), 8)

    (tmp_path / "collection").mkdir()
    pq.write_table(
        pa.table({"id": ["D1", "D2"], "text": ["a", "b"]}), tmp_path / "collection" / "p.parquet"
    )
    queries = [{"text": "q", "lang": "en"}]
    found = evaluate.search_dense(EightDims(), tmp_path / "collection", queries, [4, None], 2, 1)
    assert sorted(found) == [4, 8]
    with pytest.raises(ValueError, match=r"--dims \[16\]: the model's embeddings have 8 dims"):
        evaluate.search_dense(EightDims(), tmp_path / "collection", queries, [4, 16], 2, 1)


def test_the_report_keeps_runs_of_one_name_apart_and_counts_every_effective_query(
    tmp_path, monkeypatch
):
    """Three report defects: Tables 2 and 3 pivot by name, so two runs of one --name were one
    row holding their mean; Table 1's total left out effective queries without an IPC
    section (they count in ALL); and the significance section showed the tests of every
    dimension under the report's one."""
    import pandas as pd

    rows = [
        macro_hit(run, k, lang, value, view) | {"name": "xembed"}
        for run, value in (("a", 0.8), ("b", 0.9))
        for k in (10, 20, 100)
        for lang in ("en", "ALL")
        for view in ("ABS", "ALL")
    ]
    per_query = pd.DataFrame(
        [
            {"run_id": "a", "dim": 64, "lang": "en", "view": "ABS", "ipc_section": section}
            for section in ("A", "B", None)
        ]
    )
    test = {"run_a": "a", "run_b": "b", "lang": "ALL", "view": "ALL", "metric": "hit", "k": 100}
    significance = pd.DataFrame(
        [
            test | {"dim": 64, "value_a": 0.8, "value_b": 0.9, "diff": 0.1, "p_value": 0.0123},
            test | {"dim": 256, "value_a": 0.7, "value_b": 0.7, "diff": 0.0, "p_value": 0.9876},
        ]
    ).assign(n_queries=3)
    tables = {
        "eval/metrics": pd.DataFrame(rows),
        "eval/per_query": per_query,
        "eval/significance": significance,
    }
    monkeypatch.setattr(report, "load", lambda lake, name: tables.get(name, pd.DataFrame()))
    text = report.build("lake", ["a", "b"], tmp_path / "out").read_text()
    assert "| xembed (a) | 80.00 | 80.00 |" in text and "| xembed (b) | 90.00 | 90.00 |" in text
    assert "| en | ABS | 1 | 1 | 1 | 3 |" in text  # A, B, none, Total
    assert "0.0123" in text and "0.9876" not in text


@pytest.mark.spark
def test_the_probe_labels_cpc_only_patents_and_keeps_families_whatever_the_seed(spark):
    """A patent whose section comes from CPC alone takes its subclass from CPC, and a family
    whose hashed-first member has no collection TAC is stood for by a member that has one."""
    from spark_jobs.lib.retrieval import probe_sample

    patents = spark.createDataFrame(
        [
            ("US-1-A", "F1", "H", ["H01M 10/05"], []),
            ("US-2-A", "F2", "A", [], ["A61B5/00"]),  # CPC only
            ("US-3-A", "F3", "B", ["B01D1/00"], []),  # no TAC in the collection
            ("EP-3-A", "F3", "B", ["B01D1/00"], []),
            ("US-4-A", "F4", "C", ["G06F3/01"], []),  # no code of its section: left out
            ("US-5-A", "F5", "G", ["G06F3/01"], []),  # an excluded (test-query) family
        ],
        "publication_number string, family_id string, ipc_section string, "
        "ipc_codes array<string>, cpc_codes array<string>",
    )
    collection = spark.createDataFrame(
        [(i, "en", f"TAC of {i}") for i in ("US-1-A", "US-2-A", "EP-3-A", "US-4-A", "US-5-A")],
        "id string, lang string, text string",
    )
    excluded = spark.createDataFrame([("F5",)], "family_id string")
    for seed in range(4):
        rows = probe_sample(patents, collection, excluded, 100, seed).collect()
        labels = {r["family_id"]: (r["id"], r["section"], r["subclass"]) for r in rows}
        assert labels == {
            "F1": ("US-1-A", "H", "H01M"),
            "F2": ("US-2-A", "A", "A61B"),
            "F3": ("EP-3-A", "B", "B01D"),
        }, seed


def test_runs_of_other_paper_views_are_refused_and_strata_show_each_runs_cells():
    """A run evaluated on ABS alone sat beside runs of all four views in Tables 2-4 (each
    language's score averages the views a run evaluated), and a strata cell one run lacked
    printed "nan", with the other run's query-view count for both."""
    import pandas as pd

    def run(run_id, types):
        return {"run_id": run_id, "data_versions": {"silver/views": 3}, "query_types": types}

    four = ["ABS", "CLAIM", "DESC", "TAC"]
    runs = pd.DataFrame([run("a", ["ABS"]), run("b", four), run("c", [*four, "TITLE"])])
    message = report.mixed_inputs(runs, ["a", "b"])
    assert message.startswith("runs a and b were evaluated on different paper views (ABS / ")
    assert report.mixed_inputs(runs, ["b", "c"]) is None  # TITLE is in no paper table
    older = pd.DataFrame([{**run("a", None)}, run("b", four)])  # before the column
    assert report.mixed_inputs(older, ["a", "b"]) is None

    def stratum(run_id, year, value, n):
        return macro_hit(run_id, 100, "ALL", value) | {
            "stratum": f"year={year}",
            "ipc_section": "ALL",
            "n_queries": n,
            "small_cell": n < 5,
        }

    cells = [
        ("b", 2019, 1.0, 2),
        ("a", 2020, 0.5, 10),
        ("b", 2021, 0.75, 40),
        ("a", 2021, 0.25, 30),
    ]
    metrics = pd.DataFrame([stratum(*cell) for cell in cells])
    table = report.strata_table(metrics, ["a", "b"], 64, "year")
    assert list(table.columns) == ["year", "query views", "a", "b"]  # in --runs order
    assert table.values.tolist() == [
        ["2019", "2", "–", "100.00*"],
        ["2020", "10", "50.00", "–"],
        ["2021", "a: 30 / b: 40", "25.00", "75.00"],
    ]


def test_summary_keeps_two_runs_of_one_name_apart(tmp_path, monkeypatch, capsys):
    """`report --summary` printed one row holding the mean of two runs evaluated under one
    --name, where report.md showed both."""
    import pandas as pd

    rows = [
        macro_hit(run, 100, lang, value) | {"name": "xembed"}
        for run, value in (("x-1", 0.8), ("x-2", 0.9))
        for lang in ("en", "ALL")
    ]
    tables = {"eval/metrics": pd.DataFrame(rows), "eval/significance": pd.DataFrame()}
    monkeypatch.setattr(report, "build_session", lambda *_: None)
    monkeypatch.setattr(report, "build", lambda *_: tmp_path / "report.md")
    monkeypatch.setattr(report, "load", lambda _, name: tables[name])
    report.main(["--lake", str(tmp_path), "--runs", "x-1,x-2", "--out", str(tmp_path), "--summary"])
    out = capsys.readouterr().out
    assert "| xembed (x-1) | 80.00 | 80.00 |" in out and "| xembed (x-2) | 90.00 | 90.00 |" in out


@pytest.mark.spark
def test_a_failed_write_of_the_eval_tables_leaves_no_row_of_its_runs(spark, tmp_path):
    """eval/runs was written first and kept the run when the per-query write failed: the
    report listed a run the run log recorded as failed."""
    from datetime import UTC, datetime

    from lake import read_pandas

    lake = str(tmp_path / "lake")
    run = {"run_id": "bm25-x", "name": "bm25", "created_at": datetime.now(UTC)}
    broken = [{"query_id": "Q1"}]  # lacks the per-query table's NOT NULL columns
    with pytest.raises(ValueError, match="eval/per_query: row 0 lacks NOT NULL column"):
        evaluate.write_tables(spark, lake, [(run, broken, [])])
    assert read_pandas(lake, "eval/runs", spark).empty
