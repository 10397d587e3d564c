"""Shared constants and defaults: one place for values that several commands must agree on.

The Spark jobs, the trainer, the evaluation commands and the Airflow DAG's params all read
these, so a change here changes every default at once.
"""

from __future__ import annotations

import re

# Text views of a patent in silver/views (FIC: first independent claim).
VIEWS = ("ABS", "CLAIM", "DESC", "TAC", "FIC", "TITLE")
# The paper's four query views: Stage II training queries and evaluation queries.
QUERY_VIEWS = ("ABS", "CLAIM", "DESC", "TAC")
# IPC sections (the first letter of an IPC code): strata, landscapes, section macro-averages.
IPC_SECTIONS = tuple("ABCDEFGH")
# Every evaluation query type (README "Query types"); evaluation uses QUERY_VIEWS by default.
QUERY_TYPES = (*QUERY_VIEWS, "TITLE", "TA", "FIC", "ICLAIMS", "DESC1", "TACD", "CODES", "SUMMARY")
# Evaluation tasks of evaluation.evaluate (README "Evaluation tasks").
EVAL_TASKS = ("retrieval", "inscope", "classification", "clustering")
# Strata cells with fewer query views than this are marked small (eval/metrics.small_cell).
MIN_CELL = 10
# Training-pool patents (one per family) embedded for classification and clustering.
PROBE_SIZE = 2000
# Patents filed on or after this date with X citations are evaluation queries (split).
EVAL_CUTOFF = "2025-01-01"
# Stage I-style training recipes of build_pairs --recipe (README "Training recipes").
RECIPES = ("xembed", "r3", "r4", "qaecter")
# The paper's recipe: what build_pairs builds, export_training exports (stage1) and the
# trainer's config follows unless told otherwise.
DEFAULT_RECIPE = RECIPES[0]
# Where a pair's supervision comes from (gold/stage1_pairs.signal).
SIGNALS = ("cross_section", "cross_language", "taxonomy", "citation")
# Name of a matched-volume control: "<recipe>-matched-<other recipe>".
MATCHED = "-matched-"
# Taxonomy pairs kept per IPC subclass (recipe r4), chosen by a seeded hash.
TAXONOMY_CAP = 500
# Stage II: unique candidates per query view from BM25 united with dense retrieval.
MINE_K = 2000
# Characters of a query's text that BM25 searches with (Lucene's clause limit).
BM25_QUERY_CHARS = 2000
# Stage II examples held out for validation (build_triplets and the trainer).
VALIDATION_SIZE = 2000
# Why build_triplets drops a query view (gold/stage2_dropped.reason): its query has no filing
# date (no candidate can be shown to predate it), no candidate passed the negative filters,
# its corner strata hold fewer than 6, an X positive found fewer than 8 negatives, or its
# labelled family is in validation.
STAGE2_DROP_REASONS = (
    "no_filing_date",
    "no_candidate_after_filters",
    "corner_strata_below_6",
    "fewer_than_8_negatives",
    "labelled_family_in_validation",
)
# Rank cutoffs of Hit@K and Recall@K in evaluation.
METRIC_CUTOFFS = (10, 20, 50, 100, 200, 500)
# Matryoshka dimensions evaluated by default ("full" = the model's own dimension).
EVAL_DIMS = "64,full"

# The models at hand offline (trainer.models: built by `make setup`, or a wheel's), named
# ``builtin:<name>``.
BUILTIN_MODELS = ("me5-small", "minilm", "qwen3-tiny")
# Their architectures (config.json's model_type), known before any is loaded.
BUILTIN_MODEL_TYPES = {"me5-small": "bert", "minilm": "bert", "qwen3-tiny": "qwen3"}
# The architectures PHAGE's graph attention trains: BERT-style, bidirectional encoders.
PHAGE_MODEL_TYPES = ("bert", "roberta", "xlm-roberta")

# silver/claim_graph: edge types, and when two claims share technical content (the Jaccard
# overlap of their term sets, with at least this many shared terms).
CLAIM_RELATIONS = ("legal", "technical")
TECHNICAL_MIN_JACCARD = 0.2
TECHNICAL_MIN_SHARED = 2


def base_recipe(name: str) -> str:
    """The recipe a pair set was built with: ``r4`` for ``r4`` and ``r4-matched-r3``."""
    return name.split(MATCHED, 1)[0]


def matched_name(recipe: str, other: str) -> str:
    """The name of ``recipe``'s pair set sampled to ``other``'s volume."""
    return f"{recipe}{MATCHED}{other}"


def pair_set_name(args: dict) -> str:
    """The pair set a build_pairs run wrote, from its arguments (``meta/job_runs``)."""
    recipe = args.get("recipe") or DEFAULT_RECIPE
    other = args.get("match_volume_of")
    return matched_name(recipe, other) if other else recipe


def parse_dims(text: str) -> list[int | None]:
    """Embedding dims written like ``EVAL_DIMS`` (``--dims``, ``--matryoshka_dims``), in
    order: integers >= 1 or ``full`` (None: the model's dim).

    >>> parse_dims("64,full")
    [64, None]
    >>> parse_dims("-5")
    Traceback (most recent call last):
    ValueError: dims: expected integers >= 1 or 'full', got '-5'
    """
    try:
        dims = [None if d.strip() == "full" else int(d) for d in text.split(",") if d.strip()]
    except ValueError:
        dims = []
    if not dims or any(d is not None and d < 1 for d in dims):
        raise ValueError(f"dims: expected integers >= 1 or 'full', got {text!r}")
    return dims


#: run ids, model names and ids, encoder names: they become folder names (``<lake>/runs/<run
#: id>``) and values in the lake's SQL predicates, so no path separator, quote or space
LABEL_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._+=@-]{0,127}"


def check_label(text: str, what: str) -> str:
    """``text`` if it is a valid run id / name (``LABEL_PATTERN``), else a ValueError.

    >>> check_label("r4-matched-r3-20261204T100000", "--run-id")
    'r4-matched-r3-20261204T100000'
    >>> check_label("../x", "--run-id")
    Traceback (most recent call last):
    ValueError: --run-id: expected letters, digits and . _ + = @ - (first a letter or digit, at most 128), got '../x'
    """
    if not re.fullmatch(LABEL_PATTERN, text):
        raise ValueError(
            f"{what}: expected letters, digits and . _ + = @ - (first a letter or digit, at "
            f"most 128), got {text!r}"
        )
    return text
