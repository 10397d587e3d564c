"""Every Delta table of xembed, in one place. Paths are relative to the lake root."""

from __future__ import annotations

from schemas._spec import TableSpec, col, req

LOCALIZED = "array<struct<text:string,language:string,truncated:boolean>>"
CLASSIFICATION = "array<struct<code:string,inventive:boolean,first:boolean>>"

# --- bronze -----------------------------------------------------------------------------

BRONZE_PUBLICATIONS = TableSpec(
    "bronze/publications",
    "One valid input publication, typed, language codes normalized; bad records are in quarantine.",
    (
        req("publication_number", "string", "as in the input, e.g. 'US-7650331-B1'"),
        col("application_number", "string"),
        col("country_code", "string"),
        col("kind_code", "string"),
        req("family_id", "string", "DOCDB simple family id"),
        req("publication_date", "date"),
        col("filing_date", "date", "null when the input says 0 (unknown)"),
        col("priority_date", "date", "null when the input says 0 (unknown)"),
        col("title_localized", LOCALIZED),
        col("abstract_localized", LOCALIZED),
        col("claims_localized", LOCALIZED),
        col("description_localized", LOCALIZED),
        col("ipc", CLASSIFICATION),
        col("cpc", CLASSIFICATION),
        req("source_format", "string", "google_patents | canonical"),
        col("source_file", "string"),
        req(
            "record_hash",
            "string",
            "sha2-256 of the parsed content; equal ids with equal hashes are one record",
        ),
        req("ingested_at", "timestamp"),
    ),
    keys=("publication_number",),
)

BRONZE_CITATIONS = TableSpec(
    "bronze/citations",
    "One citation of a valid publication; cited documents outside the corpus are kept, unresolved.",
    (
        req("citing", "string", "publication_number of the citing patent"),
        req("citation_index", "int", "position in the citing record's citation list"),
        col("cited", "string", "cited publication_number; null for non-patent literature"),
        col("cited_application", "string"),
        col("npl_text", "string"),
        col(
            "category", "string", "relevance letters, upper case, sorted, e.g. 'XY'; null when none"
        ),
        col(
            "source", "string", "search-report source code: SEA, ISR, SUP, CH2, APP, EXA, OPP, ..."
        ),
        req("is_x", "boolean", "letters include X"),
        req("is_y", "boolean"),
        req("is_a", "boolean"),
        req("resolved", "boolean", "cited publication is in bronze/publications"),
        col("cited_family_id", "string", "family of the cited publication when resolved"),
    ),
    keys=("citing", "citation_index"),
    may_be_empty=True,
)

QUARANTINE = TableSpec(
    "quarantine",
    "Every rejected input record with the stage and reason; nothing is dropped silently.",
    (
        req("stage", "string", "job that rejected the record: ingest, curate, ..."),
        req("reason", "string", "machine-readable reason, e.g. invalid_date:filing_date"),
        col("record_id", "string", "publication_number when one could be read"),
        req("record", "string", "the raw record (JSON line or row as JSON)"),
        col("source_file", "string"),
        req("ingested_at", "timestamp"),
    ),
    partition_by=("stage",),
    may_be_empty=True,
)

# --- silver -----------------------------------------------------------------------------

SILVER_PATENTS = TableSpec(
    "silver/patents",
    "One patent publication with normalized dates, IPC section and languages.",
    (
        req("publication_number", "string"),
        req("family_id", "string"),
        col("application_number", "string"),
        col("country_code", "string"),
        col("kind_code", "string"),
        col("filing_date", "date"),
        req("publication_date", "date"),
        col("priority_date", "date"),
        col(
            "ipc_section",
            "string",
            "section letter A-H of the main IPC code (of the main CPC code when no IPC code "
            "gives one)",
        ),
        col("ipc_codes", "array<string>"),
        col("cpc_codes", "array<string>"),
        req("languages", "array<string>", "languages with at least one text view, sorted"),
        col("primary_lang", "string", "language of the claims (else abstract): the query language"),
    ),
    keys=("publication_number",),
)

SILVER_FAMILIES = TableSpec(
    "silver/families",
    "One DOCDB simple family with its members and languages.",
    (
        req("family_id", "string"),
        req("members", "array<string>", "publication numbers, sorted"),
        col("countries", "array<string>"),
        col("languages", "array<string>"),
        req("n_members", "int"),
        col("earliest_filing_date", "date"),
        col("earliest_publication_date", "date"),
    ),
    keys=("family_id",),
)

SILVER_VIEWS = TableSpec(
    "silver/views",
    "One text view (ABS, CLAIM, DESC, TAC, FIC, TITLE) of a patent in one language.",
    (
        req("publication_number", "string"),
        req("family_id", "string"),
        req("lang", "string"),
        req("view", "string", "ABS | CLAIM | DESC | TAC | FIC (first independent claim) | TITLE"),
        req("text", "string", "cleaned text with at least one non-blank character"),
        req("n_chars", "int"),
        req(
            "text_sha256",
            "string",
            "SHA-256 (hex) of text: equal texts, equal values (pairing's identity checks)",
        ),
    ),
    keys=("publication_number", "lang", "view"),
    partition_by=("view",),
)

SILVER_CLAIMS = TableSpec(
    "silver/claims",
    "One numbered claim with its dependencies: the claim dependency graph.",
    (
        req("publication_number", "string"),
        req("family_id", "string"),
        req("lang", "string"),
        req("claim_number", "int"),
        req("text", "string", "the claim as written, blanks collapsed, its marker left out"),
        req("independent", "boolean"),
        req(
            "depends_on", "array<int>", "claim numbers this claim refers to (edge claim -> parent)"
        ),
    ),
    keys=("publication_number", "lang", "claim_number"),
    may_be_empty=True,
)

SILVER_CLAIM_GRAPH = TableSpec(
    "silver/claim_graph",
    "Typed, directed edges between two claims of one patent and language (PHAGE's claim graph).",
    (
        req("publication_number", "string"),
        req("family_id", "string"),
        req("lang", "string"),
        req("src_claim", "int", "the later claim: the one that refers or shares"),
        req("dst_claim", "int", "the earlier claim (dst_claim < src_claim for every edge)"),
        req("relation", "string", "legal (a dependency written in the claim) | technical"),
        req("weight", "double", "legal: 1.0; technical: Jaccard overlap of the term sets"),
        req("evidence", "string", "legal: the reference as written; technical: shared terms"),
    ),
    keys=("publication_number", "lang", "src_claim", "dst_claim", "relation"),
    may_be_empty=True,
)

SILVER_EVAL_QUERIES = TableSpec(
    "silver/eval_queries",
    "Evaluation query patents: filed on/after the cutoff with >= 1 X citation in the candidate "
    "collection (a TAC view).",
    (
        req("publication_number", "string"),
        req("family_id", "string"),
        req("lang", "string", "query language = the patent's primary language"),
        col("ipc_section", "string"),
        req("filing_date", "date"),
        req(
            "x_cited",
            "array<string>",
            "X citations in the candidate collection, outside the query's own family",
        ),
        req("n_x_cited", "int"),
    ),
    keys=("publication_number",),
    may_be_empty=True,
)

SILVER_EXCLUDED_FAMILIES = TableSpec(
    "silver/excluded_families",
    "Families of evaluation queries: no member may reach any training table.",
    (
        req("family_id", "string"),
        req("query_publication_numbers", "array<string>"),
    ),
    keys=("family_id",),
    may_be_empty=True,
)

# --- gold (training data) ---------------------------------------------------------------

GOLD_STAGE1_PAIRS = TableSpec(
    "gold/stage1_pairs",
    "Stage I-style pairs of every training recipe; texts stay in silver/views.",
    (
        req(
            "recipe",
            "string",
            "xembed | r3 | r4 | qaecter, or <recipe>-matched-<recipe> (a matched-volume control)",
        ),
        req(
            "pair_type",
            "string",
            "ABS-CLAIM | CLAIM-DESC | ABS-ABS | CLAIM-CLAIM | ABS-FIC | ABS-DESC | TAXONOMY "
            "| CITATION",
        ),
        req("signal", "string", "cross_section | cross_language | taxonomy | citation"),
        req("anchor_id", "string"),
        req("anchor_lang", "string"),
        req("anchor_view", "string"),
        req("positive_id", "string"),
        req("positive_lang", "string"),
        req("positive_view", "string"),
        req("family_id", "string", "family of the anchor"),
        req(
            "positive_family_id",
            "string",
            "family of the positive (another for TAXONOMY, CITATION)",
        ),
    ),
    keys=("recipe", "pair_type", "anchor_id", "anchor_lang", "positive_id", "positive_lang"),
    partition_by=("recipe", "pair_type"),
)

GOLD_STAGE1_STATS = TableSpec(
    "gold/stage1_stats",
    "Pair counts per recipe, pair type, signal and language pair.",
    (
        req("recipe", "string"),
        req("pair_type", "string"),
        req("signal", "string"),
        req("anchor_lang", "string"),
        req("positive_lang", "string"),
        req("n_pairs", "bigint"),
    ),
    keys=("recipe", "pair_type", "anchor_lang", "positive_lang"),
    partition_by=("recipe",),
)

INDEX_EMBEDDINGS = TableSpec(
    "index/embeddings",
    "Encoder embeddings: candidate TAC texts (kind 'tac') and training query views (kind 'query').",
    (
        req("encoder", "string", "name of the mining encoder run"),
        req("kind", "string", "tac | query"),
        req("id", "string", "publication_number (tac) or query_id|view (query)"),
        req("lang", "string"),
        req("embedding", "array<float>", "L2-normalised"),
    ),
    keys=("encoder", "kind", "id"),
    partition_by=("encoder", "kind"),
)

GOLD_STAGE2_CANDIDATES = TableSpec(
    "gold/stage2_candidates",
    "Retrieval candidates per training query view (BM25 union dense), before filtering: one row "
    "per query view, its candidates as parallel arrays in union order (alternating BM25 and dense "
    "ranks), so k = 2,000 costs one row per view, not 2,000.",
    (
        req("query_id", "string"),
        req("query_view", "string"),
        req("query_lang", "string"),
        req(
            "n_available",
            "int",
            "candidates found for this query view: --k (2,000 by default) unless the pool is smaller",
        ),
        req("cand_ids", "array<string>", "n_available unique candidates, union order"),
        req("dense_scores", "array<float>", "dense score of each candidate (all of them)"),
        req("bm25_ranks", "array<int>", "BM25 rank of each candidate; null where BM25 missed it"),
        req("bm25_scores", "array<float>", "BM25 score of each candidate; null where missed"),
    ),
    keys=("query_id", "query_view"),
    partition_by=("query_view",),
)

_EXAMPLE_COLUMNS = (
    req("query_id", "string"),
    req("query_view", "string"),
    req("query_lang", "string"),
    req("query_family_id", "string"),
    req("positive_id", "string"),
    req("positive_lang", "string", "language of the positive's TAC"),
    req("positive_family_id", "string"),
    req("negative_ids", "array<string>", "exactly 8"),
    req("negative_langs", "array<string>", "language of each negative's TAC"),
    req("negative_origin", "array<string>", "stratum HH..LL (dense, BM25) or A for an A citation"),
)

GOLD_STAGE2_EXAMPLES = TableSpec(
    "gold/stage2_examples",
    "Stage II training examples: (query view, one X positive, 8 negatives).",
    _EXAMPLE_COLUMNS,
    keys=("query_id", "query_view", "positive_id"),
)

GOLD_STAGE2_VALIDATION = TableSpec(
    "gold/stage2_validation",
    "Stage II validation examples, disjoint in query families from gold/stage2_examples.",
    _EXAMPLE_COLUMNS,
    keys=("query_id", "query_view", "positive_id"),
)

GOLD_STAGE2_DROPPED = TableSpec(
    "gold/stage2_dropped",
    "Query views or examples dropped while building Stage II, with the reason.",
    (
        req("query_id", "string"),
        req("query_view", "string"),
        req("reason", "string"),
        req("count", "bigint"),
    ),
    may_be_empty=True,
)

# --- evaluation, models, data quality, run log ----------------------------------------

EVAL_RUNS = TableSpec(
    "eval/runs",
    "One evaluation run of one model.",
    (
        req("run_id", "string"),
        req("name", "string"),
        col("model_path", "string"),
        col("dims", "array<int>"),
        col("data_versions", "map<string,bigint>"),
        req("created_at", "timestamp"),
        col("tasks", "array<string>", "evaluation tasks run: retrieval, inscope, ..."),
        col("query_types", "array<string>", "query types evaluated (ABS, CLAIM, DESC, TAC, ...)"),
        col("landscape", "array<string>", "IPC sections of the landscape; empty when none"),
    ),
    keys=("run_id",),
    may_be_empty=True,
)

EVAL_PER_QUERY = TableSpec(
    "eval/per_query",
    "Per query result of an evaluation run.",
    (
        req("run_id", "string"),
        req("query_id", "string"),
        req("lang", "string"),
        req("view", "string", "query type: ABS, CLAIM, DESC, TAC, TITLE, TA, ... (README)"),
        req("dim", "int", "embedding dimension; 0 for BM25"),
        col("ipc_section", "string"),
        col("first_x_rank", "int", "rank of the first X reference; null when not retrieved"),
        req(
            "x_ranks",
            "array<int>",
            "ranks of every retrieved X reference (depth: the largest cutoff, at least 10)",
        ),
        req("n_x", "int", "X references of the query in the collection"),
        col("filing_year", "int"),
        col("country_code", "string", "jurisdiction of the query patent"),
        col("in_landscape", "boolean", "query's IPC section in --landscape; null without one"),
        col("inscope_subclass", "double", "InScope@10 at IPC subclass; null without IPC codes"),
        col("inscope_section", "double", "InScope@10 at IPC section; null without IPC codes"),
    ),
    keys=("run_id", "query_id", "view", "dim"),
    may_be_empty=True,
)

EVAL_METRICS = TableSpec(
    "eval/metrics",
    "Metric values per run, task, language, view (query type), IPC section and stratum.",
    (
        req("run_id", "string"),
        req("name", "string"),
        req("task", "string", "retrieval | inscope | classification | clustering"),
        req("lang", "string", "language code, or ALL"),
        req("view", "string", "view (query type), or ALL"),
        req("dim", "int"),
        req("ipc_section", "string", "A-H, MACRO (mean over sections) or ALL"),
        req(
            "stratum",
            "string",
            "ALL, or one cell: year=, section=, country=, lang=, landscape=IN|OUT, label=",
        ),
        req("metric", "string"),
        col("k", "int"),
        req("value", "double"),
        req("n_queries", "int", "query views (retrieval, inscope) or patents (probe tasks)"),
        col("small_cell", "boolean", "stratum rows: fewer query views than --min-cell"),
    ),
    may_be_empty=True,
)

EVAL_SIGNIFICANCE = TableSpec(
    "eval/significance",
    "Paired randomization tests between two evaluation runs per language x view and overall.",
    (
        req("run_a", "string"),
        req("run_b", "string"),
        req("lang", "string", "language code, or ALL"),
        req("view", "string", "view, or ALL"),
        req("dim", "int"),
        req("metric", "string"),
        col("k", "int"),
        req("value_a", "double"),
        req("value_b", "double"),
        req("diff", "double", "value_b - value_a"),
        req("p_value", "double", "two-sided, paired randomization"),
        req("n_queries", "int"),
        req("permutations", "int"),
        req("created_at", "timestamp"),
    ),
    keys=("run_a", "run_b", "lang", "view", "dim", "metric", "k"),
    may_be_empty=True,
)

MODELS_REGISTRY = TableSpec(
    "models/registry",
    "One finished training run.",
    (
        req("model_id", "string"),
        req("stage", "string"),
        req("base_model", "string"),
        col("parent_model", "string"),
        req("config_json", "string"),
        col("data_manifest_hash", "string"),
        col("data_versions", "map<string,bigint>"),
        col("best_val_loss", "double"),
        col("steps", "bigint"),
        req("output_path", "string"),
        req("created_at", "timestamp"),
    ),
    keys=("model_id",),
    may_be_empty=True,
)

DQ_RESULTS = TableSpec(
    "dq/results",
    "One Great Expectations expectation result per validated table and run.",
    (
        req("run_id", "string"),
        req("table_name", "string"),
        col("table_version", "bigint"),
        req("suite", "string"),
        req("expectation_type", "string"),
        col("column", "string"),
        col("kwargs_json", "string"),
        req("success", "boolean"),
        req("critical", "boolean"),
        col("unexpected_count", "bigint"),
        col("observed", "string"),
        req("validated_at", "timestamp"),
    ),
    partition_by=("table_name",),
    may_be_empty=True,
)

META_JOB_RUNS = TableSpec(
    "meta/job_runs",
    "One row per job run: arguments, Delta versions read and written, step counters.",
    (
        req("run_id", "string"),
        req("job", "string"),
        req("status", "string", "succeeded | failed"),
        col("args_json", "string"),
        col("inputs", "map<string,bigint>", "table -> Delta version read"),
        col("outputs", "map<string,bigint>", "table -> Delta version written"),
        col("metrics", "map<string,bigint>", "total / kept / dropped_<reason> counters"),
        col("error", "string"),
        req("started_at", "timestamp"),
        req("finished_at", "timestamp"),
    ),
    may_be_empty=True,
)

TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        BRONZE_PUBLICATIONS,
        BRONZE_CITATIONS,
        QUARANTINE,
        SILVER_PATENTS,
        SILVER_FAMILIES,
        SILVER_VIEWS,
        SILVER_CLAIMS,
        SILVER_CLAIM_GRAPH,
        SILVER_EVAL_QUERIES,
        SILVER_EXCLUDED_FAMILIES,
        GOLD_STAGE1_PAIRS,
        GOLD_STAGE1_STATS,
        INDEX_EMBEDDINGS,
        GOLD_STAGE2_CANDIDATES,
        GOLD_STAGE2_EXAMPLES,
        GOLD_STAGE2_VALIDATION,
        GOLD_STAGE2_DROPPED,
        EVAL_RUNS,
        EVAL_PER_QUERY,
        EVAL_METRICS,
        EVAL_SIGNIFICANCE,
        MODELS_REGISTRY,
        DQ_RESULTS,
        META_JOB_RUNS,
    )
}


def table(name: str) -> TableSpec:
    """The contract of table ``name`` (a path under the lake root)."""
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; known: {', '.join(sorted(TABLES))}") from None
