"""
# xembed_full

The whole X-Embedding pipeline: data → Stage I pairs and Stage II triplets → training
(Stage I, Stage II from Stage I, the SFT control) → evaluation (base, Stage I, SFT, and in
one task X-Embedding, BM25 and their hybrid, which reuses both lists; each runs the tasks in
`params.eval_tasks` on the query types in `params.query_types`) → report. `params.landscape`
restricts the training data to some IPC sections and splits the metrics IN / OUT of them.
`params.recipes` adds one Stage I-style training per listed recipe (`r3`, `r4`, `qaecter`,
`xembed`; `params.controls` adds matched-volume controls such as `r4-matched-r3`),
each evaluated like the rest and compared in the report's recipe table. `params.phage` adds
PHAGE (README "PHAGE"): the claim graph (`silver/claim_graph`, its gate), PHAGE training and
its no-graph control from a BERT-style base (`params.phage_base_model`, default the
profile's), both evaluated and compared with that base in the report. Data-quality gates (Great Expectations) after every data stage stop
everything downstream on a critical failure; they are never retried. Other tasks retry
once (infrastructure hiccups). XCom carries run ids, paths and Delta versions only.

Spark stages run as clients of one Spark Connect server (`params.spark_connect`, the default):
`spark_start` starts it once on `params.spark_master` and every task's Spark work runs on its
warm driver (`SPARK_REMOTE`); the teardown task `spark_stop` stops it whatever happened. With
`spark_connect` false every Spark stage is its own `spark-submit` (`params.spark_master`:
`local[2]` on a laptop, `yarn` / `k8s://...` on a cluster); trainer stages run through Bash
tasks on the worker. For
GPU nodes replace the `train_*`/`eval_*` tasks with KubernetesPodOperator tasks running
the same commands under `torchrun --nproc-per-node N` in an image holding this repository,
with `container_resources={"limits": {"nvidia.com/gpu": N}}` (see README).

Trigger with `airflow dags test xembed_full --conf '{"sample_patents": 2000}'` or from the UI.
"""

from __future__ import annotations

import functools
import json
from datetime import timedelta
from pathlib import Path

from airflow.sdk import Param, dag, task

from schemas import defaults  # constants only: no Spark, no torch at parse time

REPO = str(Path(__file__).resolve().parents[1])  # a path computation, no I/O at parse time
PARAM = "{{ params.%s }}"
LAKE, WORK = PARAM % "lake", PARAM % "work_dir"
MASTER, SEED = PARAM % "spark_master", PARAM % "seed"
# a run triggered without a logical date (Airflow 3's default) has no ts_nodash: the time
# it was queued for instead
TAG = (
    "{{ params.run_tag or (ts_nodash if ts_nodash is defined "
    "else dag_run.run_after.strftime('%Y%m%dT%H%M%S')) }}"
)
MEMORY = PARAM % "driver_memory"
SPARK_STATE = f"{PARAM % 'work_dir'}/spark"  # the Connect server's pid, URL and log
# With params.spark_connect every task is a client of the run's Spark Connect server (its URL
# is spark_start's XCom); else the driver JVM is started by spark-submit, so its memory must be
# a submit argument (a session builder's spark.driver.memory comes too late).
CONNECT = (
    "{% if params.spark_connect %}export SPARK_CONNECT_MODE_ENABLED=1 SPARK_REMOTE="
    "{{ ti.xcom_pull(task_ids='spark_start') }}; {% endif %}"
)
SUBMIT = (
    "{% if params.spark_connect %}python{% else %}"
    f"spark-submit --master '{MASTER}' --driver-memory {MEMORY}{{% endif %}} spark_jobs"
)
PROFILE = "configs/{{ params.profile }}.yaml"
# each profile's base model (the paper profile's Qwen3-Embedding-0.6B is a local path: base_model)
PROFILE_MODELS = {"cpu-e5": "builtin:me5-small", "cpu-small": "builtin:qwen3-tiny", "paper": ""}
BASE = "{{ params.base_model or " + repr(PROFILE_MODELS) + "[params.profile] }}"
STEPS = "--max_steps {{ params.train_steps if params.train_steps > 0 else -1 }}"
RETRIEVAL = f"{WORK}/retrieval"
EVAL_INPUTS = f"{WORK}/evaluation"
SHARDS = f"{WORK}/shards"
MODELS = f"{WORK}/models"
LANDSCAPE = "--landscape '{{ params.landscape }}'"
NO_RETRY = {"retries": 0}  # a data-quality failure is a finding, not a hiccup
# A retried training goes on from the last checkpoint its killed try saved (a paper-profile
# run saves every 500 steps), and trains afresh when the folder holds another run's.
RESUME_ON_RETRY = "{{ '--resume auto' if ti.try_number > 1 else '' }}"
# The pair sets to train as shell variables: $recipes (params.recipes), $controls
# (params.controls, "r4-matched-r3") and $labels (both).
CONTROL_PATTERN = "^({0}){1}({0})$".format("|".join(defaults.RECIPES), defaults.MATCHED)


def list_pattern(*words: str) -> str:
    """JSON-schema pattern of a comma-separated list of ``words`` (either case): the
    evaluation's list params are refused when the run is triggered, not after training."""
    word = "|".join(w for w in words for w in (w.upper(), w.lower()))
    return rf"^\s*({word})(\s*,\s*({word}))*\s*$"


def unknown_conf_keys(conf: dict, params) -> str | None:
    """The error for conf keys the DAG has no param for (a typo such as ``sample_patent``
    would otherwise be ignored and the run go on with the default), else None."""
    import difflib

    unknown = sorted(set(conf) - set(params))
    if not unknown:
        return None
    hints = [
        f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key)
        for key in unknown
        for close in [difflib.get_close_matches(key, list(params), n=1)]
    ]
    return f"unknown conf key(s) {', '.join(hints)}; the params are {', '.join(sorted(params))}"


def sample_too_small(conf: dict, params) -> str | None:
    """The error for a run that generates its sample (no ``input``) with ``mine_k`` at or above
    ``sample_patents``: mining asks for more candidates per query view than the sample has
    patents, so mine_candidates would fail after ingest, curate, split and the indexes."""
    value = {name: conf.get(name, params[name]) for name in ("input", "mine_k", "sample_patents")}
    if value["input"] or value["mine_k"] < value["sample_patents"]:
        return None
    return (
        f"mine_k {value['mine_k']} is not below sample_patents {value['sample_patents']}: "
        "with no input the run generates that many publications, and mining would ask each "
        "query view for more candidates than the corpus holds; pass a smaller mine_k (make "
        "demo: 100) or more sample_patents"
    )


def sample_conf_ignored(conf: dict, params) -> str | None:
    """The error for a run given both an ``input`` and sample settings other than the defaults:
    the sample settings would be ignored without a word (the run ingests the input)."""
    if not conf.get("input"):
        return None
    given = [
        f"{name} {conf[name]!r}"
        for name in ("sample_patents", "sample_options")
        if name in conf and conf[name] != params[name]
    ]
    if not given:
        return None
    return (
        f"{' and '.join(given)} would be ignored: input {conf['input']!r} is given, so the run "
        "ingests it and generates no sample; drop input to generate one, or drop the sample "
        "settings"
    )


def relative_path(conf: dict, params) -> str | None:
    """The error for a local path given relative, else None: each task runs in a temporary
    folder of its own (the Bash operator's default), so a relative ``lake``, ``work_dir``,
    ``input`` or model path would name another folder in every task."""
    for name in ("lake", "work_dir", "input", "base_model", "phage_base_model"):
        value = conf.get(name, params[name])
        if not value or value.startswith(("/", "builtin:", "file:")) or "://" in value:
            continue
        return (
            f"{name} {value!r} is a relative path: each task runs in a temporary folder of its "
            "own, where it would name another folder; pass an absolute path or a URI"
        )
    return None


def model_problem(conf: dict, params) -> str | None:
    """The error for a base model the trainings could not load, else None: the paper profile
    without ``base_model``, an unknown ``builtin:`` name, or a local path that does not hold a
    model (no ``config.json``). Found by train_stage1 (train_phage) only after ingest, curate,
    split, the indexes and the exports; the tasks share one filesystem (``work_dir``)."""
    value = {name: conf.get(name, params[name]) for name in ("profile", "base_model")}
    if value["profile"] == "paper" and not value["base_model"]:
        return (
            "profile paper needs base_model: the local path of your Qwen3-Embedding-0.6B "
            "download (there is no model hub at run time)"
        )
    builtins = {f"builtin:{name}" for name in defaults.BUILTIN_MODELS}
    for name in ("base_model", "phage_base_model"):
        model = conf.get(name, params[name])
        if not model or model in builtins:
            continue
        if model.startswith("builtin:"):
            return f"{name} {model!r} is no builtin model; known: {', '.join(sorted(builtins))}"
        if not (Path(model) / "config.json").is_file():
            what = "does not exist" if not Path(model).exists() else "holds no config.json"
            return (
                f"{name} {model!r} {what}: pass a Hugging Face model folder (e.g. your "
                "Qwen3-Embedding-0.6B download) or a builtin model"
            )
    return None


def phage_base_problem(conf: dict, params) -> str | None:
    """The error for a PHAGE run whose base model PHAGE cannot train (a decoder such as the
    cpu-small profile's tiny Qwen3), else None: train_phage found it only after the data
    tasks, the indexes and the other trainings."""
    names = ("phage", "phage_base_model", "base_model", "profile")
    value = {name: conf.get(name, params[name]) for name in names}
    if not value["phage"]:
        return None
    # as PHAGE_BASE renders train_phage's base
    base = (
        value["phage_base_model"] or value["base_model"] or PROFILE_MODELS.get(value["profile"], "")
    )
    if not base:
        return None  # the paper profile without base_model: model_problem names it
    if base.startswith("builtin:"):
        model_type = defaults.BUILTIN_MODEL_TYPES.get(base.removeprefix("builtin:"))
    else:
        try:
            model_type = json.loads((Path(base) / "config.json").read_text()).get("model_type")
        except (OSError, ValueError, AttributeError):
            return None  # no model there: model_problem names it (or the trainer does)
    if model_type is None or model_type in defaults.PHAGE_MODEL_TYPES:
        return None
    return (
        f"phage is true, but PHAGE's base {base!r} is a {model_type} model: PHAGE trains "
        f"BERT-style encoders ({', '.join(defaults.PHAGE_MODEL_TYPES)}); set "
        "phage_base_model, e.g. builtin:me5-small or builtin:minilm"
    )


# integers >= 1, 100 among them: the report's tables and the significance tests are Hit@100
# (the paper's), so a list without it would fail the last tasks, after the whole pipeline
CUTOFFS_PATTERN = r"^(?=(.*,)?\s*100\s*(,|$))\s*[1-9][0-9]*(\s*,\s*[1-9][0-9]*)*\s*$"
# The string params go into the tasks' bash commands unquoted, so a blank split a path into
# two arguments (the job failed on "unrecognized arguments") and ';', '$(...)' and the like
# ran as shell: paths, models and Spark settings are refused at trigger time unless they
# hold none of these characters (the names and URIs of local, HDFS, S3 or ABFS paths don't).
SHELL_SPECIAL = r"\s'\"`$;&|<>*?()\[\]{}%\\"
SAFE_WORD = f"^[^{SHELL_SPECIAL}]*$"
SAFE_MASTER = r"^(local(\[([1-9][0-9]*|\*)(,[1-9][0-9]*)?\])?|[^" + SHELL_SPECIAL + r"]+)$"
SAFE_FLAGS = r"^[-\w\s.,=]*$"  # extra generator flags: several words, no shell syntax
SAFE_MEMORY = r"^[1-9][0-9]*([kKmMgGtTpP][bB]?)?$"  # Spark's byte strings: 4g, 4096m, 2gb
SAFE_HINT = " (no blanks or shell characters ' \" ` $ ; & | < > * ? ( ) [ ] { } % \\)"


def word_param(default: str, description: str) -> Param:
    """A path, URI or model param: one shell word, refused at trigger time otherwise."""
    return Param(default, type="string", pattern=SAFE_WORD, description=description + SAFE_HINT)


RECIPE_LABELS = (
    "set -euo pipefail; recipes='{{ params.recipes | join(' ') }}'; "
    "controls='{{ params.controls | join(' ') }}'; labels=$(echo $recipes $controls); "
)


# PHAGE's tasks do their work only when params.phage is true (else they say so and succeed)
PHAGE_ON = "{% if params.phage %}set -euo pipefail; "
PHAGE_OFF = "{% else %}echo 'params.phage is false: nothing to do'{% endif %}"
PHAGE_BASE = (
    "{{ params.phage_base_model or params.base_model or "
    + repr(PROFILE_MODELS)
    + "[params.profile] }}"
)
# the evaluation run PHAGE is compared with: the DAG's base run unless PHAGE has its own base
PHAGE_BASE_RUN = "{{ 'phage-base' if params.phage_base_model else 'base' }}-" + TAG
PHAGE_MODELS = ("phage", "phage-nograph")


def bash(function=None, **kwargs):
    """``@task.bash`` whose command runs as a client of the run's Spark Connect server."""

    def wrap(command):
        @functools.wraps(command)
        def client_command(*args, **kw) -> str:
            return CONNECT + command(*args, **kw)

        return task.bash(**kwargs)(client_command)

    return wrap(function) if function is not None else wrap


def dq(tables: str) -> str:
    # Data Docs go under <lake>/reports; a lake on a URI has no local folder for them: the
    # work folder's then
    docs = (
        "{% if '://' in params.lake and not params.lake.startswith('file:') %}"
        f"--docs-dir {WORK}/dq-docs/dq-{TAG}{{% endif %}}"
    )
    return f"python -m expectations.run --lake {LAKE} --tables {tables} --run-id dq-{TAG} {docs}"


def train(stage: str, data: str, out: str, extra: str = "", base: str = BASE) -> str:
    return (
        f"python -m trainer.train {PROFILE} --model_name_or_path {base} --stage {stage} "
        f"--train_data {SHARDS}/{data} --output_dir {MODELS}/{out} --lake {LAKE} "
        f"--model_id {out}-{TAG} {STEPS} --disable_tqdm true {RESUME_ON_RETRY} {extra}"
    )


def encode(kind: str) -> str:
    return (
        f"python -m evaluation.encode --model {BASE} --retrieval {RETRIEVAL} --kind {kind} --lake {LAKE} "
        f"--encoder-name miner-{TAG} --max-length {{{{ params.eval_max_length }}}}"
    )


def significance(*pairs: str) -> str:
    """Paired randomization tests, nDCG@10 and Hit@100, of each ``RUN_A:RUN_B`` pair: one
    process for all of them (one Spark start, one read of eval/per_query)."""
    return (
        f"python -m evaluation.significance --lake {LAKE} --pair {' '.join(pairs)} --metric ndcg,hit "
        "--k 100 --permutations 2000 >&2"
    )


def phage_only(text: str) -> str:
    """``text`` when the run trains PHAGE (``params.phage``), else nothing."""
    return "{% if params.phage %}" + text + "{% endif %}"


def each_label(template: str, separator: str = " ") -> str:
    """A shell loop printing ``template`` (one ``%s``) and ``separator`` for each of ``$labels``."""
    return f'for r in $labels; do printf "{template}{separator}" "$r"; done'


def evaluate(models: str, names: str) -> str:
    """Evaluate one or several (space-separated) models in one process, run ids <name>-<tag>."""
    return (
        f"python -m evaluation.evaluate --lake {LAKE} --inputs {EVAL_INPUTS} --model {models} --name {names} "
        f"--run-id '{{name}}-{TAG}' --cutoffs '{{{{ params.cutoffs }}}}' --max-length {{{{ params.eval_max_length }}}} "
        f"--query-types '{{{{ params.query_types }}}}' --tasks '{{{{ params.eval_tasks }}}}' {LANDSCAPE}"
    )


@dag(
    dag_id="xembed_full",
    schedule=None,
    catchup=False,
    # runs queue: two at once on one work_dir share its Spark Connect server (the first run's
    # spark_stop ends it under the second), its shards and its model folders
    max_active_runs=1,
    doc_md=__doc__,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30), "cwd": REPO},
    params={
        "lake": word_param(f"{REPO}/demo/lake", "lake root (any Spark URI)"),
        "work_dir": word_param(f"{REPO}/demo/work", "shards, indexes, models"),
        "input": word_param("", "export to ingest; empty: generate a sample"),
        "input_format": Param("google_patents", enum=["google_patents", "canonical"]),
        "sample_patents": Param(2000, type="integer", minimum=50),
        "profile": Param(
            "cpu-e5",
            enum=list(PROFILE_MODELS),
            description="configs/<profile>.yaml: cpu-e5 (multilingual-e5-small), cpu-small "
            "(tiny random Qwen3, fast tests), paper (GPU; needs base_model)",
        ),
        "base_model": word_param(
            "",
            "base / mining encoder path; empty: the profile's "
            "(cpu-e5: builtin:me5-small, cpu-small: builtin:qwen3-tiny)",
        ),
        "sample_options": Param(
            "",
            type="string",
            pattern=SAFE_FLAGS,
            description="extra generate_sample.py flags, e.g. '--difficulty hard'",
        ),
        "spark_master": Param(
            "local[2]",
            type="string",
            pattern=SAFE_MASTER,
            description="local[N], local[*], spark://HOST:PORT, yarn, k8s://..." + SAFE_HINT,
        ),
        "driver_memory": Param(
            "4g",
            type="string",
            pattern=SAFE_MEMORY,
            description="the driver's memory (Connect server or spark-submit), e.g. 4g or 4096m",
        ),
        "spark_connect": Param(
            True,
            type="boolean",
            description="run every Spark stage on one Spark Connect server started for this run "
            "(one warm driver); false: one spark-submit per stage",
        ),
        "seed": Param(7, type="integer"),
        "eval_cutoff": Param(defaults.EVAL_CUTOFF, type="string", format="date"),
        "mine_k": Param(
            defaults.MINE_K,
            type="integer",
            minimum=10,
            description="candidates per query view (paper: 2000)",
        ),
        "validation_size": Param(
            defaults.VALIDATION_SIZE,
            type="integer",
            minimum=1,
            description="Stage II validation examples, whole query families (paper: 2000); a "
            "small corpus needs fewer: build_triplets fails if nothing is left to train on",
        ),
        "train_steps": Param(
            0, type="integer", minimum=0, description="optimizer steps per training; 0: one epoch"
        ),
        "cutoffs": Param(
            ",".join(map(str, defaults.METRIC_CUTOFFS)),
            type="string",
            pattern=CUTOFFS_PATTERN,
            description="metric cutoffs k of hit@k and recall@k, comma-separated, 100 among "
            "them (the report's tables and the significance tests are Hit@100)",
        ),
        "eval_max_length": Param(4096, type="integer", minimum=16),
        "landscape": Param(
            "",
            type="string",
            pattern=r"^\s*([A-Ha-h]\s*(,\s*[A-Ha-h]\s*)*)?$",
            description="IPC sections (e.g. G,H): train only on them, report IN vs OUT; empty: all",
        ),
        "query_types": Param(
            ",".join(defaults.QUERY_VIEWS),
            type="string",
            pattern=f"^\\s*(all|ALL)\\s*$|{list_pattern(*defaults.QUERY_TYPES)}",
            description=f"evaluation query types, or 'all' ({', '.join(defaults.QUERY_TYPES)})",
        ),
        "eval_tasks": Param(
            ",".join(defaults.EVAL_TASKS),
            type="string",
            # retrieval among them: the report and the significance tests read its Hit@100
            pattern="^(?=.*\\b(retrieval|RETRIEVAL)\\b)" + list_pattern(*defaults.EVAL_TASKS)[1:],
            description=f"evaluation tasks, a subset of {', '.join(defaults.EVAL_TASKS)} "
            "holding retrieval (the report's tables are retrieval's)",
        ),
        "recipes": Param(
            [],
            type="array",
            items={"type": "string", "enum": list(defaults.RECIPES)},
            uniqueItems=True,  # twice would train it twice and fail eval_recipes' names
            description="Stage I-style training recipes to train and compare (README 'Training "
            'recipes\'), e.g. ["r3", "r4", "qaecter"]; empty: none',
        ),
        "controls": Param(
            [],
            type="array",
            items={"type": "string", "pattern": CONTROL_PATTERN},
            uniqueItems=True,
            description="matched-volume controls to train beside the recipes, as "
            "<recipe>-matched-<other> (e.g. r4-matched-r3: r4's signals at r3's pair count; "
            "<other> must be built first, e.g. listed in recipes)",
        ),
        "phage": Param(
            False,
            type="boolean",
            description="also build the claim graph, train PHAGE and its no-graph control, "
            "evaluate both against their base (README 'PHAGE')",
        ),
        "phage_base_model": word_param(
            "",
            "PHAGE's base: a BERT-style encoder (builtin:me5-small, builtin:minilm, a "
            "path); empty: the profile's, which for cpu-small (a decoder) PHAGE refuses",
        ),
        "run_tag": Param(
            "",
            type="string",
            pattern=f"^({defaults.LABEL_PATTERN})?$",
            description="suffix of run ids; empty: the logical date",
        ),
    },
)
def xembed_full():
    @task.bash
    def spark_start() -> str:
        from airflow.sdk import get_current_context
        from airflow.sdk.exceptions import AirflowFailException

        context = get_current_context()
        conf, params = context["dag_run"].conf or {}, context["dag"].params
        error = (
            unknown_conf_keys(conf, params)
            or sample_too_small(conf, params)
            or sample_conf_ignored(conf, params)
            or relative_path(conf, params)
            or model_problem(conf, params)
            or phage_base_problem(conf, params)
        )
        if error:  # the first task, so nothing has run; a retry would not help
            raise AirflowFailException(error)
        return (
            "{% if params.spark_connect %}"
            f"python -m lake.connect start --state {SPARK_STATE} --master '{MASTER}' "
            f"--driver-memory {MEMORY}"
            "{% else %}echo 'params.spark_connect is false: each stage runs spark-submit'{% endif %}"
        )

    @task.bash
    def spark_stop() -> str:
        return f"python -m lake.connect stop --state {SPARK_STATE}"

    @task.bash
    def prepare_input() -> str:
        return (
            "{% if params.input %}echo {{ params.input }}{% else %}"
            f"{SUBMIT}/generate_sample.py --out {WORK}/sample "
            f"--patents {{{{ params.sample_patents }}}} --seed {SEED} {{{{ params.sample_options }}}} >&2"
            f" && echo {WORK}/sample{{% endif %}}"
        )

    @bash
    def ingest(source: str) -> str:
        return f"{SUBMIT}/ingest.py --lake {LAKE} --input {source} --format {{{{ params.input_format }}}}"

    @bash
    def curate() -> str:
        return f"{SUBMIT}/curate.py --lake {LAKE}"

    @bash
    def split() -> str:
        return f"{SUBMIT}/split.py --lake {LAKE} --eval-cutoff {{{{ params.eval_cutoff }}}}"

    @bash(**NO_RETRY)
    def dq_silver() -> str:
        return dq(
            "bronze/publications,bronze/citations,quarantine,silver/patents,silver/families,"
            "silver/views,silver/claims,silver/eval_queries,silver/excluded_families"
        )

    @bash
    def build_pairs() -> str:
        return f"{SUBMIT}/build_pairs.py --lake {LAKE} --seed {SEED} {LANDSCAPE}"

    @bash(**NO_RETRY)
    def dq_pairs() -> str:
        return dq("gold/stage1_pairs,gold/stage1_stats")

    @bash
    def export_stage1() -> str:
        return f"{SUBMIT}/export_training.py --lake {LAKE} --dataset stage1 --format parquet --out {SHARDS}/stage1"

    @bash
    def train_stage1() -> str:
        return train("stage1", "stage1", "stage1")

    @bash
    def prepare_retrieval() -> str:
        return f"{SUBMIT}/prepare_retrieval.py --lake {LAKE} --out {RETRIEVAL} {LANDSCAPE}"

    @bash
    def bm25_index() -> str:
        return f"python -m evaluation.index bm25 --collections {RETRIEVAL}/bm25 --out {RETRIEVAL}/bm25_index"

    @bash
    def encode_candidates() -> str:
        return encode("tac")

    @bash
    def encode_queries() -> str:
        return encode("query")

    @bash(**NO_RETRY)
    def dq_embeddings() -> str:
        return dq("index/embeddings")

    @bash
    def faiss_index() -> str:
        return f"python -m evaluation.index faiss --lake {LAKE} --encoder miner-{TAG} --out {RETRIEVAL}/faiss"

    @bash
    def mine_candidates() -> str:
        return (
            f"{SUBMIT}/mine_candidates.py --lake {LAKE} --retrieval {RETRIEVAL} --encoder miner-{TAG} "
            f"--k {{{{ params.mine_k }}}}"
        )

    @bash
    def build_triplets() -> str:
        return (
            f"{SUBMIT}/build_triplets.py --lake {LAKE} --seed {SEED} "
            f"--validation-size {{{{ params.validation_size }}}} {LANDSCAPE}"
        )

    @bash(**NO_RETRY)
    def dq_triplets() -> str:
        return dq(
            "gold/stage2_candidates,gold/stage2_examples,gold/stage2_validation,gold/stage2_dropped"
        )

    @bash
    def export_stage2() -> str:
        return (
            f"{SUBMIT}/export_training.py --lake {LAKE} --dataset stage2 --format parquet --out {SHARDS}/stage2"
            f" && {SUBMIT}/export_training.py --lake {LAKE} --dataset stage2_validation --format parquet"
            f" --out {SHARDS}/stage2_validation"
        )

    stage2_data = f"--validation_data {SHARDS}/stage2_validation"

    @bash
    def train_stage2() -> str:
        return train("stage2", "stage2", "xembed", f"--init_model {MODELS}/stage1 {stage2_data}")

    @bash
    def train_sft() -> str:
        return train("sft", "stage2", "sft", stage2_data)

    @bash
    def prepare_evaluation() -> str:
        return f"{SUBMIT}/prepare_evaluation.py --lake {LAKE} --out {EVAL_INPUTS} --seed {SEED}"

    @bash
    def eval_base() -> str:
        return evaluate(BASE, "base")

    @bash
    def eval_stage1() -> str:
        return evaluate(f"{MODELS}/stage1", "stage1")

    @bash
    def eval_sft() -> str:
        return evaluate(f"{MODELS}/sft", "sft")

    @bash
    def eval_xembed() -> str:
        # X-Embedding, BM25 and their fusion in one process: one encoding, one BM25 search
        return evaluate(f"{MODELS}/xembed hybrid:{MODELS}/xembed bm25", "xembed hybrid bm25")

    @bash
    def build_recipes() -> str:
        # the full recipes first: a matched control samples another recipe's written volume
        build = f"{SUBMIT}/build_pairs.py --lake {LAKE} --seed {SEED} {LANDSCAPE}"
        return (
            f"{RECIPE_LABELS} for r in $recipes; do {build} --recipe $r; done; "
            f'for c in $controls; do {build} --recipe "${{c%%{defaults.MATCHED}*}}" '
            f'--match-volume-of "${{c##*{defaults.MATCHED}}}"; done; echo $labels'
        )

    @bash(**NO_RETRY)
    def dq_recipes() -> str:
        return f'{RECIPE_LABELS} if [ -n "$labels" ]; then {dq("gold/stage1_pairs,gold/stage1_stats")}; fi'

    @bash
    def export_recipes() -> str:
        return (
            f"{RECIPE_LABELS} for r in $labels; do {SUBMIT}/export_training.py --lake {LAKE} "
            f"--dataset stage1 --recipe $r --format parquet --out {SHARDS}/recipe-$r; done"
        )

    @bash
    def train_recipes() -> str:
        # each pair set from the base model with Stage I's settings and its recipe's section
        return f"{RECIPE_LABELS} for r in $labels; do {train('stage1', 'recipe-$r', 'recipe-$r')}; done"

    @bash
    def eval_recipes() -> str:
        models, names = f"$({each_label(f'{MODELS}/recipe-%s')})", f"$({each_label('recipe-%s')})"
        return f'{RECIPE_LABELS} if [ -n "$labels" ]; then {evaluate(models, names)}; fi'

    @bash
    def claim_graph() -> str:
        return f"{PHAGE_ON}{SUBMIT}/claim_graph.py --lake {LAKE}{PHAGE_OFF}"

    @bash(**NO_RETRY)
    def dq_claim_graph() -> str:
        return f"{PHAGE_ON}{dq('silver/claim_graph')}{PHAGE_OFF}"

    @bash
    def export_phage() -> str:
        return (
            f"{PHAGE_ON}{SUBMIT}/export_training.py --lake {LAKE} --dataset phage --format parquet "
            f"--out {SHARDS}/phage {LANDSCAPE}{PHAGE_OFF}"
        )

    @bash
    def train_phage() -> str:
        # the same data, steps and objective; the control drops the graph from attention
        phage = train("phage", "phage", "phage", base=PHAGE_BASE)
        control = train("phage", "phage", "phage-nograph", "--graph_attention false", PHAGE_BASE)
        return f"{PHAGE_ON}{phage} && {control}{PHAGE_OFF}"

    @bash
    def eval_phage() -> str:
        # PHAGE, its control and (when PHAGE has its own base) that base, in one process
        models = " ".join(f"{MODELS}/{m}" for m in PHAGE_MODELS)
        names = " ".join(PHAGE_MODELS)
        own_base = f"{{% if params.phage_base_model %}} {PHAGE_BASE}{{% endif %}}"
        own_name = "{% if params.phage_base_model %} phage-base{% endif %}"
        return f"{PHAGE_ON}{evaluate(models + own_base, names + own_name)}{PHAGE_OFF}"

    @bash
    def report() -> str:
        runs = ",".join(f"{n}-{TAG}" for n in ("bm25", "base", "stage1", "sft", "xembed", "hybrid"))
        recipe_runs = f"$({each_label(f'recipe-%s-{TAG}', ',')})"
        phage_runs = ",".join(f"{m}-{TAG}" for m in PHAGE_MODELS)
        # every comparison of the run in one process: SFT vs X-Embedding, each recipe vs the
        # base, PHAGE vs its base and vs its no-graph control
        recipe_pairs = f"$({each_label(f'base-{TAG}:recipe-%s-{TAG}')})"
        phage_pairs = " ".join(
            [
                *(f"{PHAGE_BASE_RUN}:{m}-{TAG}" for m in PHAGE_MODELS),
                f"phage-nograph-{TAG}:phage-{TAG}",
            ]
        )
        return (
            f"{RECIPE_LABELS}"
            f"{significance(f'sft-{TAG}:xembed-{TAG}', recipe_pairs, phage_only(phage_pairs))}"
            f" && python -m evaluation.report --lake {LAKE} --runs {runs} --compare sft-{TAG},xembed-{TAG}"
            f' --recipes "{recipe_runs}" --base base-{TAG} --out {LAKE}/reports/eval-{TAG}'
            f' --phage "{phage_only(phage_runs)}" --phage-base {PHAGE_BASE_RUN}'
        )

    silver, source = dq_silver(), prepare_input()
    spark, done = spark_start(), report()
    spark >> source
    done >> spark_stop().as_teardown(setups=spark)
    ingest(source) >> curate() >> split() >> silver

    pairs_ok, stage1 = dq_pairs(), train_stage1()
    silver >> build_pairs() >> pairs_ok >> export_stage1() >> stage1

    bm25, tacs, queries, faiss, mined = (
        bm25_index(),
        encode_candidates(),
        encode_queries(),
        faiss_index(),
        mine_candidates(),
    )
    silver >> prepare_retrieval() >> [bm25, tacs, queries]
    [tacs, queries] >> dq_embeddings() >> faiss
    [bm25, faiss] >> mined
    triplets_ok, shards = dq_triplets(), export_stage2()
    mined >> build_triplets() >> triplets_ok >> shards

    xembed, sft = train_stage2(), train_sft()
    [stage1, shards] >> xembed
    shards >> sft
    evals = {
        "base": eval_base(),
        "stage1": eval_stage1(),
        "sft": eval_sft(),
        "xembed": eval_xembed(),
    }
    silver >> prepare_evaluation() >> list(evals.values())
    stage1 >> evals["stage1"]
    sft >> evals["sft"]
    xembed >> evals["xembed"]
    recipe_models = train_recipes()
    pairs_ok >> build_recipes() >> dq_recipes() >> export_recipes() >> recipe_models
    recipe_evals = eval_recipes()
    recipe_models >> recipe_evals
    phage_evals = eval_phage()
    silver >> claim_graph() >> dq_claim_graph() >> export_phage() >> train_phage() >> phage_evals
    [*evals.values(), recipe_evals, phage_evals] >> done


xembed_full()
