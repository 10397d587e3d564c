"""Tables 1-4 and Figures 2-3 of the paper, from the eval Delta tables.

    python -m evaluation.report --lake data/lake --runs bm25-...,stage1-...,sft-...,xembed-... --out reports/eval \\
        [--dim 64] [--compare sft-...,xembed-...]

Writes report.md, report.html, fig2_language_view_differences.png and fig3_macro_hit_at_k.png.
Every number comes from eval/metrics, eval/per_query and eval/significance.
"""

from __future__ import annotations

import argparse
import html
import sys
from pathlib import Path

import pandas as pd

from lake import add_lake_arguments, build_session, read_pandas
from schemas import defaults

LANG_LABEL = {"zh": "CN", "en": "EN", "ja": "JP"}
VIEWS = list(defaults.QUERY_VIEWS)


def load(lake: str, name: str) -> pd.DataFrame:
    """An eval table as pandas; empty (with its columns) when it was never written."""
    return read_pandas(lake, name)


def run_dim(metrics: pd.DataFrame, run: str, dim: int) -> int:
    dims = set(metrics[metrics.run_id == run].dim)
    if dim in dims:
        return dim
    if dims == {0}:
        return 0  # BM25
    raise ValueError(f"run {run} has no dimension {dim} (has {sorted(dims)})")


def macro(
    metrics: pd.DataFrame, runs: list[str], dim: int, metric: str, k: int | None
) -> pd.DataFrame:
    """run, name, lang, view, value of the IPC-section macro scores (lang/view may be ALL)."""
    parts = []
    for run in runs:
        d = run_dim(metrics, run, dim)
        m = metrics[
            (metrics.run_id == run)
            & (metrics.dim == d)
            & (metrics.ipc_section == "MACRO")
            & (metrics.metric == metric)
        ]
        m = m[m.k == k] if k is not None else m[m.k.isna()]
        parts.append(m)
    return (
        pd.concat(parts)[["run_id", "name", "lang", "view", "value"]] if parts else pd.DataFrame()
    )


def _fmt(frame: pd.DataFrame, percent: bool = True) -> str:
    shown = frame.copy()
    for c in shown.columns:
        if shown[c].dtype.kind == "f":
            shown[c] = shown[c].map(lambda v: f"{100 * v:.2f}" if percent else f"{v:.4f}")
    header = "| " + " | ".join(map(str, shown.columns)) + " |"
    rule = "|" + "---|" * len(shown.columns)
    rows = ["| " + " | ".join(map(str, r)) + " |" for r in shown.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def table1(per_query: pd.DataFrame, run: str) -> pd.DataFrame:
    rows = per_query[per_query.run_id == run]
    rows = rows[rows.dim == rows.dim.min()]
    counts = (
        rows.groupby(["lang", "view", "ipc_section"]).size().unstack("ipc_section", fill_value=0)
    )
    counts["Total"] = counts.sum(axis=1)
    return counts.reset_index().rename(columns={"lang": "Language", "view": "View"})


def table2(m: pd.DataFrame) -> pd.DataFrame:
    overall = m[m.view == "ALL"].pivot_table(
        index="name", columns="lang", values="value", sort=False
    )
    cols = [c for c in ("zh", "en", "ja") if c in overall.columns] + ["ALL"]
    return (
        overall[cols]
        .rename(columns={**LANG_LABEL, "ALL": "Overall"})
        .reset_index()
        .rename(columns={"name": "Model"})
    )


def table3(m: pd.DataFrame) -> pd.DataFrame:
    cells = m[(m.lang != "ALL") & (m.view != "ALL")]
    wide = cells.pivot_table(index=["lang", "view"], columns="name", values="value", sort=False)
    return wide.reset_index().rename(columns={"lang": "Language", "view": "View"})


def table4(metrics: pd.DataFrame, a: str, b: str, dim: int) -> pd.DataFrame:
    rows = []
    for k in (10, 20):
        m = macro(metrics, [a, b], dim, "hit", k)
        langs = m[m.view == "ALL"]
        for lang in [x for x in ("zh", "en", "ja", "ALL") if x in set(langs.lang)]:
            va = float(langs[(langs.run_id == a) & (langs.lang == lang)].value.iloc[0])
            vb = float(langs[(langs.run_id == b) & (langs.lang == lang)].value.iloc[0])
            rows.append(
                {
                    "K": k,
                    "Language": LANG_LABEL.get(lang, "Overall"),
                    "A": va,
                    "B": vb,
                    "B - A": vb - va,
                }
            )
    return pd.DataFrame(rows)


def figure2(m: pd.DataFrame, a: str, b: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = m[m.lang != "ALL"]
    wide = cells.pivot_table(index=["lang", "view"], columns="run_id", values="value")
    diff = (wide[b] - wide[a]) * 100
    fig, ax = plt.subplots(figsize=(9, 3.5))
    labels = [f"{LANG_LABEL.get(lang, lang)}-{view}" for lang, view in diff.index]
    ax.bar(labels, diff.values, color=["tab:blue" if v >= 0 else "tab:red" for v in diff.values])
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("Δ macro Hit@100 (pp)")
    ax.set_title("Language × view differences (B − A)")
    plt.xticks(rotation=60, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def figure3(metrics: pd.DataFrame, runs: list[str], dim: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for run in runs:
        d = run_dim(metrics, run, dim)
        m = metrics[
            (metrics.run_id == run)
            & (metrics.dim == d)
            & (metrics.metric == "hit")
            & (metrics.lang == "ALL")
            & (metrics.view == "ALL")
        ].sort_values("k")
        ax.plot(m.k, m.value * 100, marker="o", label=m.name.iloc[0] if len(m) else run)
    ax.set_xscale("log")
    ax.set_xlabel("K")
    ax.set_ylabel("overall macro Hit@K (%)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build(
    lake: str, runs: list[str], out: Path, dim: int = 64, compare: tuple[str, str] | None = None
) -> Path:
    metrics, per_query = load(lake, "eval/metrics"), load(lake, "eval/per_query")
    missing = [r for r in runs if r not in set(metrics.get("run_id", []))]
    if missing:
        raise ValueError(f"eval/metrics has no rows for run(s) {missing}")
    out.mkdir(parents=True, exist_ok=True)
    a, b = compare or (runs[-2], runs[-1]) if len(runs) >= 2 else (runs[0], runs[0])
    m100 = macro(metrics, runs, dim, "hit", 100)
    sections = [
        (
            "Table 1: effective query counts per view by IPC section",
            _fmt(table1(per_query, runs[0]), False),
        ),
        (f"Table 2: IPC-section macro Hit@100 (%), {dim} dimensions", _fmt(table2(m100))),
        ("Table 3: macro Hit@100 (%) by language and query view", _fmt(table3(m100))),
        (f"Table 4: Hit@10 and Hit@20 (%), A = {a}, B = {b}", _fmt(table4(metrics, a, b, dim))),
    ]
    significance = load(lake, "eval/significance")
    if not significance.empty:
        sig = significance[(significance.run_a == a) & (significance.run_b == b)]
        if not sig.empty:
            shown = sig[
                [
                    "lang",
                    "view",
                    "metric",
                    "k",
                    "value_a",
                    "value_b",
                    "diff",
                    "p_value",
                    "n_queries",
                ]
            ]
            sections.append((f"Paired randomization tests, A = {a}, B = {b}", _fmt(shown, False)))
    figure2(m100, a, b, out / "fig2_language_view_differences.png")
    figure3(metrics, runs, dim, out / "fig3_macro_hit_at_k.png")
    figures = [
        (
            "Figure 2: language × view differences of macro Hit@100",
            "fig2_language_view_differences.png",
        ),
        ("Figure 3: overall macro Hit@K across cutoffs", "fig3_macro_hit_at_k.png"),
    ]
    md = ["# xembed evaluation report", "", f"Runs: {', '.join(runs)}", ""]
    for title, body in sections:
        md += [f"## {title}", "", body, ""]
    for title, file in figures:
        md += [f"## {title}", "", f"![{title}]({file})", ""]
    (out / "report.md").write_text("\n".join(md))
    (out / "report.html").write_text(_html(sections, figures, runs))
    return out / "report.md"


def summary_table(metrics, significance, runs: list[str], dim: int, a: str, b: str) -> str:
    """Table 2 (macro Hit@100 %) with a last row: the p-value of B vs A per column."""
    wide = table2(macro(metrics, runs, dim, "hit", 100))
    shown = wide.copy()
    for c in shown.columns[1:]:
        shown[c] = shown[c].map(lambda v: f"{100 * v:.2f}")
    if not significance.empty:
        sig = significance[
            (significance.run_a == a)
            & (significance.run_b == b)
            & (significance.dim == dim)
            & (significance.view == "ALL")
            & (significance.metric == "hit")
            & (significance.k == 100)
        ]
        p = {
            LANG_LABEL.get(r.lang, "Overall" if r.lang == "ALL" else r.lang): r.p_value
            for r in sig.itertuples()
        }
        if p:
            label = f"p ({b} vs {a})"
            row = [label] + [f"{p[c]:.4f}" if c in p else "" for c in shown.columns[1:]]
            shown.loc[len(shown)] = row
    return _fmt(shown)


def _html(sections, figures, runs) -> str:
    def table(md: str) -> str:
        lines = [line for line in md.splitlines() if not line.startswith("|---")]
        cells = [[html.escape(c.strip()) for c in line.strip("|").split("|")] for line in lines]
        head = "".join(f"<th>{c}</th>" for c in cells[0])
        body = "".join(
            "<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells[1:]
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>xembed evaluation</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}"
        "td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}</style></head><body>",
        "<h1>xembed evaluation report</h1>",
        f"<p>Runs: {html.escape(', '.join(runs))}</p>",
    ]
    for title, body in sections:
        parts += [f"<h2>{html.escape(title)}</h2>", table(body)]
    for title, file in figures:
        parts += [
            f"<h2>{html.escape(title)}</h2>",
            f"<img src='{file}' alt='{html.escape(title)}'>",
        ]
    return "\n".join([*parts, "</body></html>"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lake_arguments(parser, required=True)
    parser.add_argument("--runs", required=True, help="comma-separated run ids, in table order")
    parser.add_argument("--out", required=True)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument(
        "--compare", default=None, help="A,B for Table 4 / Figure 2 (default: the last two runs)"
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="print the overall / per-language macro Hit@100 of every run (Table 2)",
    )
    args = parser.parse_args(argv)
    build_session("xembed-report", args.master)  # the session every read below shares
    runs = [r for r in args.runs.split(",") if r]
    compare = tuple(args.compare.split(",")) if args.compare else None
    path = build(args.lake, runs, Path(args.out), args.dim, compare)
    if not args.summary:
        print(path)
        return 0
    metrics = load(args.lake, "eval/metrics")
    a, b = compare or (runs[-2], runs[-1])
    print(f"\nIPC-section macro Hit@100 (%), {args.dim} dimensions (BM25: lexical)\n")
    print(summary_table(metrics, load(args.lake, "eval/significance"), runs, args.dim, a, b))
    print(f"\nreport:    {path.parent / 'report.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
