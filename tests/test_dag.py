"""The xembed_full DAG: imports, wiring, a full `airflow dags test` run, and a failing DQ gate."""

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lake import connect
from tests.conftest import END_TO_END, sliced_minilm

ROOT = Path(__file__).resolve().parents[1]
DAGS = ROOT / "dags"


def airflow_env(home: Path) -> dict:
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "GX_ANALYTICS_ENABLED": "False",
    }


def airflow(home: Path, *args: str, timeout: int = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), *args],
        env=airflow_env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
    )


def dag_module():
    """dags/xembed_full.py as a module (the DAGs folder is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("xembed_full", DAGS / "xembed_full.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    return bag.dags["xembed_full"]


def upstream(dag, task_id: str) -> set[str]:
    return set(dag.get_task(task_id).upstream_task_ids)


def test_dag_wires_the_stages_in_order(dag):
    # one Spark Connect server for the whole run: started first, stopped last whatever happened
    assert upstream(dag, "prepare_input") == {"spark_start"}
    stop = dag.get_task("spark_stop")
    assert stop.is_teardown and dag.get_task("spark_start").is_setup
    assert upstream(dag, "spark_stop") == {"spark_start", "report"}
    assert upstream(dag, "ingest") == {"prepare_input"}
    assert upstream(dag, "curate") == {"ingest"} and upstream(dag, "split") == {"curate"}
    assert upstream(dag, "dq_silver") == {"split"}
    assert upstream(dag, "build_pairs") == {"dq_silver"} and upstream(dag, "dq_pairs") == {
        "build_pairs"
    }
    assert upstream(dag, "export_stage1") == {"dq_pairs"} and upstream(dag, "train_stage1") == {
        "export_stage1"
    }
    assert upstream(dag, "prepare_retrieval") == {"dq_silver"}
    assert upstream(dag, "dq_embeddings") == {"encode_candidates", "encode_queries"}
    assert upstream(dag, "faiss_index") == {"dq_embeddings"}
    assert upstream(dag, "mine_candidates") == {"bm25_index", "faiss_index"}
    assert upstream(dag, "dq_triplets") == {"build_triplets"} and upstream(
        dag, "export_stage2"
    ) == {"dq_triplets"}
    assert upstream(dag, "train_stage2") == {"train_stage1", "export_stage2"}
    assert upstream(dag, "train_sft") == {"export_stage2"}
    assert upstream(dag, "prepare_evaluation") == {"dq_silver"}
    assert upstream(dag, "eval_xembed") == {"train_stage2", "prepare_evaluation"}
    assert upstream(dag, "eval_sft") == {"train_sft", "prepare_evaluation"}
    assert upstream(dag, "eval_base") == {"prepare_evaluation"}
    # BM25 and the hybrid are evaluated with X-Embedding: one encoding, one BM25 search
    command = dag.get_task("eval_xembed").python_callable()
    assert "hybrid:" in command and " bm25" in command
    # every significance test of the run in the report's one process, none in the evaluations
    scoring = [t for t in dag.tasks if t.task_id.startswith("eval_") or t.task_id == "report"]
    tests = [t.task_id for t in scoring if "evaluation.significance" in t.python_callable()]
    assert len(scoring) == 7 and tests == ["report"]
    assert upstream(dag, "report") == {
        "eval_base",
        "eval_stage1",
        "eval_sft",
        "eval_xembed",
        "eval_recipes",
        "eval_phage",
    }
    assert upstream(dag, "claim_graph") == {"dq_silver"}
    assert upstream(dag, "dq_claim_graph") == {"claim_graph"}
    assert upstream(dag, "export_phage") == {"dq_claim_graph"}
    assert upstream(dag, "train_phage") == {"export_phage"}
    assert upstream(dag, "eval_phage") == {"train_phage"}
    assert upstream(dag, "build_recipes") == {"dq_pairs"}
    assert upstream(dag, "dq_recipes") == {"build_recipes"}
    assert upstream(dag, "export_recipes") == {"dq_recipes"}
    assert upstream(dag, "train_recipes") == {"export_recipes"}
    assert upstream(dag, "eval_recipes") == {"train_recipes"}
    for task in dag.tasks:
        assert task.retries == (0 if task.task_id.startswith("dq_") else 1), task.task_id
    assert {
        "lake",
        "input",
        "input_format",
        "sample_patents",
        "profile",
        "spark_master",
        "spark_connect",
        "seed",
    } <= set(dag.params)
    assert dag.params["spark_connect"] is True
    from schemas import defaults

    # the DAG's defaults are the shared ones, not copies
    assert dag.params["mine_k"] == defaults.MINE_K
    assert dag.params["validation_size"] == defaults.VALIDATION_SIZE
    assert dag.params["eval_cutoff"] == defaults.EVAL_CUTOFF
    assert dag.params["cutoffs"] == ",".join(map(str, defaults.METRIC_CUTOFFS))
    assert dag.params["query_types"] == ",".join(defaults.QUERY_VIEWS)  # the paper's tables
    assert dag.params["eval_tasks"] == ",".join(defaults.EVAL_TASKS)
    assert dag.params["landscape"] == ""
    assert (
        dag.params["recipes"] == [] and dag.params["controls"] == []
    )  # the paper's DAG by default
    assert dag.params["phage"] is False and dag.params["phage_base_model"] == ""
    # a second run on the same work_dir reused the first's Spark Connect server, which the
    # first run's spark_stop then ended under it: runs queue
    assert dag.max_active_runs == 1


def test_a_retried_training_goes_on_from_its_checkpoints(dag):
    """Every train task retried from scratch: a killed paper-profile run lost every step since
    its last checkpoint. A retry now passes --resume auto (the trainer goes on from the
    folder's checkpoint when it is this run's, else trains afresh); a first try trains afresh."""
    from types import SimpleNamespace

    trains = [t for t in dag.tasks if t.task_id.startswith("train_")]
    assert {t.task_id for t in trains} >= {"train_stage1", "train_stage2", "train_phage"}
    env = dag.get_template_env()
    params = {name: dag.params[name] for name in dag.params}
    params.update(phage=True, recipes=["r3"], controls=["r4-matched-r3"])  # every branch
    for task in trains:
        command = task.python_callable()
        runs = command.count("python -m trainer.train")
        for try_number, resumes in ((1, 0), (2, runs)):
            rendered = env.from_string(command).render(
                params=params,
                ti=SimpleNamespace(try_number=try_number, xcom_pull=lambda **_: "sc://h:1"),
                ts_nodash="T",
            )
            assert rendered.count("--resume auto") == resumes, (task.task_id, rendered)
        assert task.retries == 1 and runs >= 1


def test_the_evaluation_list_params_are_checked_when_a_run_is_triggered(dag):
    """A typo in cutoffs, query_types or eval_tasks was found by the evaluation, after the
    whole pipeline had run; the params' patterns refuse it at trigger time."""
    import copy

    from airflow.sdk.definitions.param import ParamValidationError

    def fresh(name):  # resolve() keeps what it passes: leave the module's DAG as it was
        return copy.deepcopy(dag.params.get_param(name))

    good = {
        "cutoffs": "10, 100",
        "query_types": "all",
        "eval_tasks": "retrieval,inscope",
        "run_tag": "v2.1",
    }
    bad = {
        "cutoffs": "0,abc",
        "query_types": "ABS,FOO",
        "eval_tasks": "retrieval,nope",
        "run_tag": "../v2",  # run ids are folders under <lake>/runs and SQL values
    }
    for name, value in good.items():
        assert fresh(name).resolve(value) == value
        if name != "run_tag":  # its default, empty, means the logical date
            assert fresh(name).resolve(dag.params[name])  # the default passes
        with pytest.raises(ParamValidationError, match="does not match"):
            fresh(name).resolve(bad[name])
    # the report's tables and the significance tests read Hit@100: a list without 100 failed
    # the report, the last task, with pandas' "None of [Index(['ALL'] ...] are in the [columns]"
    for cutoffs in ("10, 20,100", "100", " 100 ,10", "10,20,50,100,200,500"):
        assert fresh("cutoffs").resolve(cutoffs) == cutoffs
    for cutoffs in ("10,20,50", "1000", "10,1001", "100,x"):
        with pytest.raises(ParamValidationError, match="does not match"):
            fresh("cutoffs").resolve(cutoffs)
    assert fresh("query_types").resolve("abs,TAC") == "abs,TAC"
    # typos the trigger let through, found by build_pairs or the last tasks: a landscape of
    # two letters run together; a task list without retrieval (the report reads its Hit@100);
    # a recipe listed twice (trained twice, then eval_recipes refused the repeated name)
    for name, good_values, bad_values in (
        ("landscape", ("", "A,B,C,H", " g , h "), ("AB", "G H", "gh", "A,,B", "I")),
        ("eval_tasks", ("retrieval", "inscope, RETRIEVAL"), ("inscope", "clustering,inscope")),
        ("recipes", (["r3", "r4"],), (["r3", "r3"],)),
        ("controls", (["r4-matched-r3"],), (["r4-matched-r3", "r4-matched-r3"],)),
    ):
        for value in good_values:
            assert fresh(name).resolve(value) == value
        for value in bad_values:
            with pytest.raises(ParamValidationError, match=r"does not match|non-unique"):
                fresh(name).resolve(value)


def test_list_params_reach_the_commands_whole_and_tags_need_no_logical_date(dag):
    """The list params went into bash unquoted: "10, 100" passed the trigger and failed
    every eval task on "unrecognized arguments: 100". A run triggered without a logical date
    (Airflow 3's default) has no ts_nodash: 18 tasks failed to render, dq_silver first. A
    lake on a URI failed dq_silver: the Data Docs had no local folder."""
    import datetime
    import shlex
    from types import SimpleNamespace

    env = dag.get_template_env()
    by_id = {t.task_id: t for t in dag.tasks}
    params = {name: dag.params[name] for name in dag.params} | {
        "cutoffs": "10, 100",
        "query_types": "abs, tac",
        "eval_tasks": "retrieval, inscope",
        "lake": "hdfs://nn:8020/x/lake",
    }
    context = {
        "params": params,
        "ti": SimpleNamespace(try_number=1, xcom_pull=lambda **_: "sc://h:1"),
        "dag_run": SimpleNamespace(run_after=datetime.datetime(2026, 12, 7, 19, 20, 5)),
    }
    words = shlex.split(env.from_string(by_id["eval_base"].python_callable()).render(**context))
    for flag, value in (("--cutoffs", "10, 100"), ("--query-types", "abs, tac")):
        assert words[words.index(flag) + 1] == value
    assert words[words.index("--tasks") + 1] == "retrieval, inscope"
    assert words[words.index("--run-id") + 1] == "{name}-20261207T192005"
    dq = shlex.split(env.from_string(by_id["dq_silver"].python_callable()).render(**context))
    assert dq[dq.index("--docs-dir") + 1] == f"{params['work_dir']}/dq-docs/dq-20261207T192005"
    local = context | {"params": params | {"lake": "/srv/lake"}}
    assert "--docs-dir" not in env.from_string(by_id["dq_silver"].python_callable()).render(**local)
    # with a logical date, its ts_nodash as before
    tagged = env.from_string(by_id["dq_silver"].python_callable()).render(
        **context, ts_nodash="20260101T000000"
    )
    assert "--run-id dq-20260101T000000" in tagged


def test_paths_and_spark_settings_the_shell_would_split_or_run_are_refused(dag):
    """The string params reach bash unquoted: a lake path with a blank failed every job on
    "unrecognized arguments", and '; cmd' or '$(cmd)' in a path ran as shell. They are refused
    at trigger time; what real paths, URIs, masters and memory sizes hold still passes."""
    import copy
    import shlex
    from types import SimpleNamespace

    from airflow.sdk.definitions.param import ParamValidationError

    good = {
        "lake": [
            "hdfs://nn:8020/x/lake",
            "s3a://b/x-y_z/lake",
            "abfss://c@a.dfs.core.windows.net/l",
        ],
        "work_dir": ["/tmp/w.1/work", "file:///tmp/x=1/work"],
        "input": ["", "gs://bucket/export/2024-01"],
        "base_model": ["", "builtin:me5-small", "/models/Qwen3-Embedding-0.6B"],
        "phage_base_model": ["", "builtin:minilm"],
        "spark_master": ["local[2]", "local[*]", "local[4,2]", "spark://h:7077", "yarn"],
        "driver_memory": ["4g", "4096m", "2GB", "512"],
        "sample_options": ["", "--difficulty hard --bad-share 0.1"],
    }
    bad = ["/tmp/a b/lake", "/tmp/x;touch /tmp/y", "$(id)", "`id`", "a|b", "a>b", "x'y", "%s"]
    for name, values in good.items():
        param = copy.deepcopy(dag.params.get_param(name))  # resolve() keeps what it passes
        for value in values:
            assert param.resolve(value) == value, (name, value)
        refused = bad + {"spark_master": ["local[2];id"], "driver_memory": ["4 g", "-1g"]}.get(
            name, []
        )
        for value in refused:
            with pytest.raises(ParamValidationError, match="does not match"):
                param.resolve(value)
    # what passes stays one word where the shell reads it: the master, whose [ ] and * are
    # glob characters, is quoted in the commands that take it
    env = dag.get_template_env()
    params = {name: dag.params[name] for name in dag.params} | {"spark_connect": False}
    by_id = {t.task_id: t for t in dag.tasks}
    command = env.from_string(by_id["curate"].python_callable()).render(
        params=params | {"lake": "hdfs://nn:8020/x/lake", "spark_master": "local[*]"},
        ti=SimpleNamespace(try_number=1, xcom_pull=lambda **_: ""),
        ts_nodash="T",
    )
    words = shlex.split(command)
    assert words[words.index("--master") + 1] == "local[*]"
    assert words[words.index("--lake") + 1] == "hdfs://nn:8020/x/lake"


def test_a_generated_sample_smaller_than_mine_k_fails_the_first_task(dag):
    """With no input the run generates sample_patents publications; mine_k at or above that
    failed mine_candidates after ingest, curate, split and the indexes (the DAG's defaults,
    2,000 and 2,000, did). spark_start now refuses such a conf, naming both params."""
    sample_too_small = dag_module().sample_too_small
    error = sample_too_small({}, dag.params)
    assert error.startswith("mine_k 2000 is not below sample_patents 2000")
    assert sample_too_small({"sample_patents": 300, "mine_k": 300}, dag.params)
    assert sample_too_small({"mine_k": 100}, dag.params) is None  # make demo's
    assert sample_too_small({"input": "/data/export"}, dag.params) is None  # a real corpus


def test_sample_settings_beside_an_input_fail_the_first_task(dag):
    """With an input the run generates no sample: sample_patents and sample_options given
    beside it were ignored without a word."""
    ignored = dag_module().sample_conf_ignored
    error = ignored({"input": "/data/x", "sample_patents": 300}, dag.params)
    assert error.startswith("sample_patents 300 would be ignored: input '/data/x' is given")
    both = ignored({"input": "/d", "sample_patents": 300, "sample_options": "--seed 3"}, dag.params)
    assert "sample_patents 300 and sample_options '--seed 3'" in both
    assert ignored({"sample_patents": 300}, dag.params) is None  # a generated sample
    defaults_only = {"input": "/d", "sample_patents": dag.params["sample_patents"]}
    assert ignored(defaults_only | {"sample_options": ""}, dag.params) is None


def test_a_base_model_the_trainings_could_not_load_fails_the_first_task(dag, tmp_path):
    """The paper profile without base_model, or a base_model folder that holds no model,
    failed train_stage1 only after the data tasks (hours on a real corpus)."""
    from trainer.models import BUILTINS

    model_problem = dag_module().model_problem
    assert model_problem({}, dag.params) is None  # cpu-e5's builtin
    assert model_problem({"profile": "paper"}, dag.params).startswith(
        "profile paper needs base_model"
    )
    empty = tmp_path / "qwen3"
    empty.mkdir()
    assert "holds no config.json" in model_problem(
        {"profile": "paper", "base_model": str(empty)}, dag.params
    )
    assert "does not exist" in model_problem({"phage_base_model": str(tmp_path / "x")}, dag.params)
    assert "no builtin model" in model_problem({"base_model": "builtin:me5"}, dag.params)
    (empty / "config.json").write_text("{}")
    assert model_problem({"profile": "paper", "base_model": str(empty)}, dag.params) is None
    for name in BUILTINS:
        assert model_problem({"base_model": f"builtin:{name}"}, dag.params) is None
    # the trainer loads a model from a local folder only
    assert "does not exist" in model_problem({"base_model": "hdfs://nn/qwen3"}, dag.params)


def test_a_phage_run_on_a_base_phage_cannot_train_fails_the_first_task(dag, tmp_path):
    """make demo DEMO_PROFILE=cpu-small DEMO_PHAGE=true ran 22 tasks before train_phage
    refused the profile's tiny Qwen3 (a decoder); the first task now names the fix."""
    from schemas import defaults
    from trainer.models import resolve

    problem = dag_module().phage_base_problem
    small = {"phage": True, "profile": "cpu-small"}
    assert "'builtin:qwen3-tiny' is a qwen3 model" in problem(small, dag.params)
    assert "set phage_base_model" in problem(small, dag.params)
    assert problem(small | {"phage_base_model": "builtin:minilm"}, dag.params) is None
    assert problem({"profile": "cpu-small"}, dag.params) is None  # no PHAGE
    assert problem({"phage": True}, dag.params) is None  # cpu-e5: me5-small
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    assert "is a qwen3 model" in problem({"phage": True, "base_model": str(folder)}, dag.params)
    (folder / "config.json").write_text(json.dumps({"model_type": "xlm-roberta"}))
    assert problem({"phage": True, "phage_base_model": str(folder)}, dag.params) is None
    # the DAG knows the builtins' architectures without loading them: the same as theirs
    for name, model_type in defaults.BUILTIN_MODEL_TYPES.items():
        config = json.loads((Path(resolve(f"builtin:{name}")) / "config.json").read_text())
        assert config["model_type"] == model_type
    assert set(defaults.BUILTIN_MODEL_TYPES) == set(defaults.BUILTIN_MODELS)


@pytest.mark.integration
def test_a_conf_key_the_dag_does_not_know_fails_the_run_before_anything_runs(tmp_path):
    """A typo (`sample_patent`) was ignored: the run went on with the default sample size."""
    home = tmp_path / "airflow"
    assert airflow(home, "db", "migrate").returncode == 0
    conf = {"lake": str(tmp_path / "lake"), "work_dir": str(tmp_path / "work"), "sample_patent": 9}
    done = airflow(home, "dags", "test", "xembed_full", "--conf", json.dumps(conf))
    output = done.stdout + done.stderr
    assert "unknown conf key(s) 'sample_patent' (did you mean 'sample_patents'?)" in output
    states = airflow(
        home, "tasks", "states-for-dag-run", "xembed_full", _run_id(output), "--output", "json"
    )
    by_task = {t["task_id"]: t["state"] for t in json.loads(states.stdout)}
    assert by_task.pop("spark_start") == "failed"  # not retried: a retry would not help
    assert set(by_task.values()) <= {"upstream_failed", None}, by_task
    assert not (tmp_path / "work").exists() and not (tmp_path / "lake").exists()


@contextlib.contextmanager
def stopping_the_server(work: Path):
    """Run a DAG run and check its teardown stopped its Spark Connect server; stop a server
    left behind (a killed run) so no driver outlives the test."""
    try:
        yield
    finally:
        left = connect.stop(work / "spark")
    assert (work / "spark" / "connect.log").exists()  # the run used a server
    assert not left, "the DAG run left its Spark Connect server running"


def _run_id(output: str) -> str:
    match = re.search(r"DagRun Finished: .*?run_id=([^,\s]+)", output)
    assert match, output[-3000:]
    return match.group(1)


def test_a_relative_path_fails_the_first_task(dag):
    """Each task runs in a temporary folder of its own, so a relative lake, work_dir, input
    or model named another folder in every task (and vanished with it)."""
    relative_path = dag_module().relative_path
    assert relative_path({}, dag.params) is None  # the defaults are absolute
    for name in ("lake", "work_dir", "input", "base_model", "phage_base_model"):
        error = relative_path({name: "data/x"}, dag.params)
        assert error.startswith(f"{name} 'data/x' is a relative path"), error
        for fine in ("/srv/x", "s3a://b/x", "file:/srv/x", "builtin:minilm", ""):
            assert relative_path({name: fine}, dag.params) is None


@pytest.mark.integration
# under `make test` one worker runs this while the other takes the rest of the suite
@pytest.mark.xdist_group(END_TO_END)
def test_airflow_dags_test_runs_the_whole_pipeline(tmp_path):
    home = tmp_path / "airflow"
    assert airflow(home, "db", "migrate").returncode == 0
    conf = {
        "lake": str(tmp_path / "lake"),
        "work_dir": str(tmp_path / "work"),
        "sample_patents": 300,
        "profile": "cpu-small",  # the tiny model keeps CI short; make demo runs cpu-e5
        "seed": 3,
        "mine_k": 60,
        "validation_size": 40,
        "train_steps": 4,
        "eval_max_length": 96,
        "cutoffs": "10,100",
        "landscape": "A,B,C,H",  # about 3/4 of this sample's patents
        "query_types": "ABS,TAC,TITLE,SUMMARY",
        # one recipe and one matched control run the recipe branch (both loops); what each
        # recipe pairs, and r4 against r3, is tests/test_recipes.py's
        "recipes": ["r3"],
        "controls": ["r4-matched-r3"],
        "phage": True,
        # PHAGE needs a BERT-style base, not cpu-small's: MiniLM's first layer keeps CI short
        "phage_base_model": sliced_minilm(tmp_path / "minilm-1"),
        "run_tag": "ci",
    }
    with stopping_the_server(tmp_path / "work"):
        done = airflow(
            home, "dags", "test", "xembed_full", "--conf", json.dumps(conf), timeout=4500
        )
    assert done.returncode == 0 and "state=success" in done.stdout + done.stderr, (
        done.stdout + done.stderr
    )[-5000:]
    metrics = DeltaTable(str(tmp_path / "lake" / "eval" / "metrics")).to_pandas()
    names = ("bm25", "base", "stage1", "sft", "xembed", "hybrid")
    recipes = ("recipe-r3", "recipe-r4-matched-r3")
    phage = ("phage-base", "phage", "phage-nograph")
    assert set(metrics.run_id) == {f"{n}-ci" for n in (*names, *recipes, *phage)}
    assert set(metrics[metrics.run_id == "phage-ci"].task) == set(
        metrics[metrics.run_id == "base-ci"].task
    )
    assert set(metrics[metrics.run_id == "base-ci"].task) == {
        "retrieval",
        "inscope",
        "classification",
        "clustering",
    }
    assert {"landscape=IN", "landscape=OUT"} <= set(metrics.stratum)
    assert set(metrics.view) >= {"TITLE", "SUMMARY"}
    jobs = DeltaTable(str(tmp_path / "lake" / "meta" / "job_runs")).to_pandas()
    pairs_args = json.loads(jobs[jobs.job == "build_pairs"].args_json.iloc[-1])
    assert pairs_args["landscape"] == ["A", "B", "C", "H"]  # the training data was restricted
    registry = DeltaTable(str(tmp_path / "lake" / "models" / "registry")).to_pandas()
    assert set(registry.model_id) == {
        "stage1-ci",
        "xembed-ci",
        "sft-ci",
        *(f"{r}-ci" for r in recipes),
        "phage-ci",
        "phage-nograph-ci",
    }
    pairs = DeltaTable(str(tmp_path / "lake" / "gold" / "stage1_pairs")).to_pandas()
    volume = pairs.recipe.value_counts()
    assert volume["r4-matched-r3"] == volume["r3"] and "r4" not in volume
    significance = DeltaTable(str(tmp_path / "lake" / "eval" / "significance")).to_pandas()
    tested = set(zip(significance.run_a, significance.run_b, strict=True))
    assert {("base-ci", f"{r}-ci") for r in recipes} <= tested
    assert {("phage-base-ci", "phage-ci"), ("phage-nograph-ci", "phage-ci")} <= tested
    parent = registry.set_index("model_id").parent_model["xembed-ci"]
    assert parent.endswith("models/stage1") and Path(parent).is_absolute()
    report = (tmp_path / "lake" / "reports" / "eval-ci" / "report.md").read_text()
    assert "Query types" in report and "In- vs out-of-landscape" in report
    assert "Training recipes" in report and "recipe-r4-matched-r3" in report
    assert "PHAGE: claim-graph attention" in report and "phage-nograph" in report
    graph = DeltaTable(str(tmp_path / "lake" / "silver" / "claim_graph")).to_pandas()
    assert set(graph.relation) == {"legal", "technical"}
    assert (tmp_path / "lake" / "reports" / "dq-ci" / "index.html").exists()


@pytest.mark.integration
def test_a_planted_dq_violation_fails_the_gate_and_stops_downstream(tmp_path):
    from datetime import UTC, datetime

    future = (
        f"{datetime.now(UTC).year + 3}-01-01"  # a real calendar date nobody can have published yet
    )
    source = tmp_path / "canonical"
    (source / "patents").mkdir(parents=True)
    (source / "citations").mkdir()
    rows = [
        {
            "publication_number": f"US-{i}-A1",
            "family_id": f"F{i}",
            "lang": "en",
            "title": "Cup",
            "abstract": f"A cup number {i}.",
            "claims": "1. A cup.",
            "publication_date": "2021-03-04",
            "filing_date": "2020-01-02",
            "ipc": ["A47G19/00"],
        }
        for i in range(20)
    ]
    rows[7]["publication_date"] = future
    (source / "patents" / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (source / "citations" / "c.jsonl").write_text(
        json.dumps({"citing": "US-1-A1", "cited": "US-2-A1", "category": "X", "source": "SEA"})
        + "\n"
    )
    home = tmp_path / "airflow"
    assert airflow(home, "db", "migrate").returncode == 0
    conf = {
        "lake": str(tmp_path / "lake"),
        "work_dir": str(tmp_path / "work"),
        "input": str(source),
        "input_format": "canonical",
        "run_tag": "bad",
        "eval_cutoff": "2020-01-01",  # US-1 (filed 2020-01-02, cites US-2 X) is the query
    }
    with stopping_the_server(tmp_path / "work"):
        done = airflow(home, "dags", "test", "xembed_full", "--conf", json.dumps(conf))
    output = done.stdout + done.stderr
    states = airflow(
        home, "tasks", "states-for-dag-run", "xembed_full", _run_id(output), "--output", "json"
    )
    by_task = {t["task_id"]: t["state"] for t in json.loads(states.stdout)}
    assert by_task["split"] == "success" and by_task["dq_silver"] == "failed"
    assert by_task["spark_stop"] == "success"  # the teardown stopped the server after the failure
    for task in ("build_pairs", "prepare_retrieval", "eval_base", "train_stage1", "report"):
        assert by_task[task] in ("upstream_failed", None), (task, by_task[task])
    results = DeltaTable(str(tmp_path / "lake" / "dq" / "results")).to_pandas()
    failed = results[~results.success & results.critical]
    assert set(failed.column) == {"publication_date"}


def test_each_profile_resolves_its_base_model_and_significance_its_depth():
    from jinja2 import Template

    module = dag_module()
    BASE, PROFILE_MODELS = module.BASE, module.PROFILE_MODELS

    def render(**params):
        return Template(BASE).render(params={"base_model": "", **params})

    assert render(profile="cpu-e5") == "builtin:me5-small"
    assert render(profile="cpu-small") == "builtin:qwen3-tiny"
    assert render(profile="paper", base_model="/models/Qwen3-Embedding-0.6B") == (
        "/models/Qwen3-Embedding-0.6B"
    )
    for profile in PROFILE_MODELS:  # every profile has its config file
        assert (Path(__file__).resolve().parents[1] / "configs" / f"{profile}.yaml").exists()


def test_progress_prints_one_line_per_task_and_names_the_failed_one(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("progress", DAGS / "progress.py")
    progress = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(progress)
    stamp = "2026-12-01T08:31:{}Z [info     ] "
    hook = " [airflow.task.hooks.SubprocessHook] loc=subprocess.py:106"
    lines = [
        stamp.format("11.000000") + "[DAG TEST] starting task_id=ingest map_index=-1",
        stamp.format("20.000000") + "[ingest]        records_kept          1,491" + hook,
        stamp.format("20.100000") + "[ingest]     citations_total            725" + hook,
        stamp.format("57.000000") + "Task instance state updated    [x] new_state=success rows=1",
        stamp.format("57.500000") + "[DAG TEST] end task task_id=ingest map_index=-1",
        # two exports in one task: the second's rows used to replace the first's on the line
        stamp.format("57.600000") + "[DAG TEST] starting task_id=export_stage2 map_index=-1",
        stamp.format("57.700000") + "[export_training]                  rows          1,823" + hook,
        stamp.format("57.800000") + "[export_training]                  rows             42" + hook,
        stamp.format("57.850000") + "Task instance state updated    [x] new_state=success rows=1",
        stamp.format("57.900000") + "[DAG TEST] end task task_id=export_stage2 map_index=-1",
        stamp.format("58.000000") + "[DAG TEST] starting task_id=curate map_index=-1",
        stamp.format("59.000000") + "curate: input table bronze/publications is empty",
        stamp.format("59.500000") + "Task instance state updated    [x] new_state=failed rows=1",
        stamp.format("59.600000") + "[DAG TEST] end task task_id=curate map_index=-1",
        stamp.format("59.700000") + "DagRun Finished: dag_id=xembed_full, state=failed, run_type=x",
    ]
    script = "import sys; print(sys.argv[1]); sys.exit(1)"
    log = tmp_path / "logs" / "demo.log"
    code = progress.follow([sys.executable, "-c", script, "\n".join(lines)], log, total=3)
    out, err = capsys.readouterr()
    assert code == 1
    assert out.splitlines()[:4] == [
        f"full log: {log}",
        "[1/3] ingest                    46.5s  success  records_kept=1,491",
        "[2/3] export_stage2              0.3s  success  rows=1,823+42",
        "[3/3] curate                     1.6s  failed",
    ]
    assert "curate: input table bronze/publications is empty" in err  # the log's tail
    assert err.rstrip().endswith(f"FAILED: task(s) curate; the full log is {log}")
    assert log.read_text().splitlines() == lines  # every line kept, in order

    # a task retried once and then successful (the DAG retries once by design): the run
    # succeeded, but progress failed it (and make demo skipped its report), counting 2/1
    retried = [
        stamp.format("11.000000") + "[DAG TEST] starting task_id=ingest map_index=-1",
        stamp.format("12.000000") + "Task instance state updated    [x] new_state=up_for_retry",
        stamp.format("12.500000") + "[DAG TEST] end task task_id=ingest map_index=-1",
        stamp.format("13.000000") + "[DAG TEST] starting task_id=ingest map_index=-1",
        stamp.format("20.000000") + "Task instance state updated    [x] new_state=success rows=1",
        stamp.format("20.500000") + "[DAG TEST] end task task_id=ingest map_index=-1",
        stamp.format("21.000000")
        + "DagRun Finished: dag_id=xembed_full, state=success, run_type=x",
    ]
    script = "import sys; print(sys.argv[1])"
    code = progress.follow([sys.executable, "-c", script, "\n".join(retried)], log, total=1)
    out, err = capsys.readouterr()
    assert code == 0 and "FAILED" not in err
    assert out.splitlines()[1:3] == [
        "[0/1] ingest                     1.5s  up_for_retry",
        "[1/1] ingest                     7.5s  success",
    ]
