"""Figures from ``strata bench`` JSON Lines (and from AirTune's design JSON).

Command line::

    python -m strata.plot RESULTS.jsonl [MORE.jsonl ...] --out FIG.png \\
        [--kind pareto|bars|latency|design-map] [--workload lookup] [--baseline btree]

Kinds of figure:

- ``pareto``: memory (bits/key, log scale) against I/O per lookup (pages per
  operation, or ``--y modelled`` µs per operation, or ``--y latency`` p50),
  one point per index configuration of the chosen workload, with the Pareto
  frontier. Records whose y value is null (peers that do not expose page
  counts) are left out and named in the legend title.
- ``bars``: throughput per index for every workload (grouped bars), each bar
  labelled with its ratio to the baseline (the first index of each workload,
  or ``--baseline KIND``).
- ``latency``: latency CDFs reconstructed from the percentiles of each record
  (p50, p99, p99.9, max), on a "nines" axis.
- ``design-map``: AirTune's candidate designs, from a JSON document of this
  schema (``--kind design-map`` reads one JSON object, not JSON Lines)::

      {"dataset": "fb-like", "profile": "nvme",
       "designs": [{"label": "band(64) > step(4096)", "memory_bytes": 12345,
                    "modelled_us": 81.2, "chosen": false}, ...]}

  plotted as memory against modelled latency, the frontier drawn and the
  chosen design marked.

Records are grouped by ``spec`` (the index spec as given), falling back to
``index``. Records with different ``dataset`` values are drawn as separate
series (``spec @ dataset``) unless ``--dataset`` selects one.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

Record = Dict[str, Any]


def load_jsonl(paths: Iterable[str]) -> List[Record]:
    """Reads JSON Lines files (blank lines skipped) into a list of records."""
    out: List[Record] = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{p}:{n}: not JSON: {e}") from None
    return out


def _label(r: Record, multi_dataset: bool) -> str:
    name = str(r.get("spec") or r.get("index"))
    return f"{name} @ {r.get('dataset')}" if multi_dataset else name


def _select(records: Sequence[Record], workload: Optional[str], dataset: Optional[str], cache: Optional[str]) -> List[Record]:
    rs = [r for r in records if dataset is None or r.get("dataset") == dataset]
    rs = [r for r in rs if cache is None or r.get("cache") == cache]
    if workload is not None:
        rs = [r for r in rs if r.get("workload") == workload]
    return rs


def _y_value(r: Record, y: str) -> Optional[float]:
    if y == "pages":
        return (r.get("io") or {}).get("pages_per_op")
    if y == "modelled":
        return (r.get("io") or {}).get("modelled_us_per_op")
    if y == "latency":
        lat = r.get("latency_ns") or {}
        return None if lat.get("p50") is None else lat["p50"] / 1e3
    raise ValueError(f"unknown y {y!r}: pages, modelled or latency")


_Y_LABEL = {
    "pages": "pages read per lookup",
    "modelled": "modelled µs per lookup",
    "latency": "p50 latency (µs)",
}


def pareto_frontier(points: Sequence[Tuple[float, float]]) -> List[Tuple[float, float]]:
    """The points not dominated by another (smaller x and smaller y both better), sorted by x."""
    best: List[Tuple[float, float]] = []
    for x, y in sorted(points):
        if not best or y < best[-1][1]:
            best.append((x, y))
    return best


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def pareto(records: Sequence[Record], out: str, workload: str = "lookup", y: str = "pages",
           dataset: Optional[str] = None, cache: Optional[str] = None, title: Optional[str] = None) -> None:
    """Bits/key against I/O per operation, with the Pareto frontier; writes ``out``."""
    plt = _plt()
    rs = _select(records, workload, dataset, cache)
    if not rs:
        raise ValueError(f"no records for workload {workload!r}")
    multi = len({r.get("dataset") for r in rs}) > 1
    fig, ax = plt.subplots(figsize=(7, 4.5))
    skipped = []
    by_ds: Dict[Any, List[Tuple[float, float]]] = {}
    for r in rs:
        yv = _y_value(r, y)
        bits = r.get("bits_per_key")
        if yv is None or bits is None:
            skipped.append(_label(r, multi))
            continue
        x = max(float(bits), 1e-3)
        ax.scatter([x], [yv], s=40, zorder=3)
        ax.annotate(_label(r, multi), (x, yv), textcoords="offset points", xytext=(5, 4), fontsize=8)
        by_ds.setdefault(r.get("dataset"), []).append((x, float(yv)))
    for ds, pts in by_ds.items():
        front = pareto_frontier(pts)
        ax.plot([p[0] for p in front], [p[1] for p in front], "--", color="grey", lw=1, zorder=2,
                label=f"Pareto frontier ({ds})" if multi else "Pareto frontier")
    ax.set_xscale("log")
    ax.set_xlabel("memory (bits per key, log scale)")
    ax.set_ylabel(_Y_LABEL[y])
    ax.grid(True, which="both", alpha=0.3)
    t = title or f"{workload}: memory vs I/O"
    ax.set_title(t)
    ax.legend(fontsize=8, loc="best")
    if skipped:
        fig.text(0.01, 0.01, f"not shown (no {y} data): {', '.join(sorted(set(skipped)))}", fontsize=7)
    fig.tight_layout(rect=(0, 0.04 if skipped else 0, 1, 1))
    fig.savefig(out, dpi=120)
    plt.close(fig)


def bars(records: Sequence[Record], out: str, baseline: Optional[str] = None, dataset: Optional[str] = None,
         cache: Optional[str] = None, workloads: Optional[Sequence[str]] = None, title: Optional[str] = None) -> None:
    """Throughput per index, grouped by workload, labelled with ratios to the baseline."""
    plt = _plt()
    rs = _select(records, None, dataset, cache)
    if workloads:
        rs = [r for r in rs if r.get("workload") in workloads]
    if not rs:
        raise ValueError("no records to plot")
    multi = len({r.get("dataset") for r in rs}) > 1
    groups: List[Tuple[Any, str]] = []
    for r in rs:
        g = (r.get("dataset"), r.get("workload"), r.get("cache"))
        if g not in [x[0] for x in groups]:
            groups.append((g, f"{r.get('workload')}" + (f"\n{r.get('dataset')}" if multi else "")
                           + (f"\n{r.get('cache')}" if cache is None and len({x.get('cache') for x in rs}) > 1 else "")))
    names: List[str] = []
    for r in rs:
        n = str(r.get("spec") or r.get("index"))
        if n not in names:
            names.append(n)
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(min(14, max(7, 0.3 * len(groups) * max(1, len(names)) + 2)), 5))
    for j, name in enumerate(names):
        xs, ys, ratios = [], [], []
        for i, (g, _) in enumerate(groups):
            grp = [r for r in rs if (r.get("dataset"), r.get("workload"), r.get("cache")) == g]
            mine = [r for r in grp if str(r.get("spec") or r.get("index")) == name]
            if not mine:
                continue
            base = None
            if baseline is not None:
                base = next((r for r in grp if r.get("index") == baseline or r.get("spec") == baseline), None)
            if base is None:
                base = grp[0]
            t = float(mine[0]["throughput_ops_s"])
            bt = float(base["throughput_ops_s"])
            xs.append(i + (j - (len(names) - 1) / 2) * width)
            ys.append(t / 1e3)
            ratios.append(t / bt if bt > 0 else float("nan"))
        bs = ax.bar(xs, ys, width=width, label=name)
        for b, ratio in zip(bs, ratios):
            ax.annotate(f"{ratio:.2f}×", (b.get_x() + b.get_width() / 2, b.get_height()),
                        textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7, rotation=90)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g[1] for g in groups], fontsize=8)
    ax.set_ylabel("throughput (kops/s)")
    # Log scale only when throughputs span more than 30x (cold vs warm runs).
    tputs = [float(r["throughput_ops_s"]) for r in rs if float(r["throughput_ops_s"]) > 0]
    if tputs and max(tputs) / min(tputs) > 30:
        ax.set_yscale("log")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.set_title(title or f"throughput; labels: ratio to {baseline or 'the first index'}")
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


_QUANTILES = (("p50", 0.5), ("p99", 0.99), ("p999", 0.999), ("max", 1.0))


def latency_points(r: Record) -> List[Tuple[float, float]]:
    """``(latency µs, quantile)`` points of a record's percentiles, in order."""
    lat = r.get("latency_ns") or {}
    return [(lat[k] / 1e3, q) for k, q in _QUANTILES if lat.get(k) is not None]


def latency(records: Sequence[Record], out: str, workload: str = "lookup", dataset: Optional[str] = None,
            cache: Optional[str] = None, title: Optional[str] = None) -> None:
    """Latency CDFs from percentiles on a nines axis (y = -log10(1 - q))."""
    plt = _plt()
    rs = _select(records, workload, dataset, cache)
    if not rs:
        raise ValueError(f"no records for workload {workload!r}")
    multi = len({r.get("dataset") for r in rs}) > 1
    top = 4.0  # where "max" is drawn: above p99.9
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rs:
        pts = latency_points(r)
        xs = [p[0] for p in pts]
        ys = [top if q >= 1.0 else -math.log10(1.0 - q) for _, q in pts]
        ax.plot(xs, ys, "o-", label=_label(r, multi), ms=4)
    ax.set_xscale("log")
    ax.set_yticks([-math.log10(0.5), 2, 3, top])
    ax.set_yticklabels(["p50", "p99", "p99.9", "max"])
    ax.set_xlabel("latency (µs, log scale)")
    ax.set_ylabel("quantile")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title or f"{workload}: latency distribution")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def design_map(doc: Dict[str, Any], out: str, title: Optional[str] = None) -> None:
    """AirTune's design map: memory against modelled latency of every candidate design."""
    plt = _plt()
    designs = doc.get("designs")
    if not isinstance(designs, list) or not designs:
        raise ValueError('design map JSON needs a non-empty "designs" list')
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pts = []
    for d in designs:
        try:
            x, y = float(d["memory_bytes"]), float(d["modelled_us"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"design needs memory_bytes and modelled_us: {d!r}") from None
        pts.append((max(x, 1.0), y))
        chosen = bool(d.get("chosen"))
        ax.scatter([max(x, 1.0)], [y], s=90 if chosen else 25, marker="*" if chosen else "o",
                   color="crimson" if chosen else "tab:blue", zorder=3)
        if chosen or len(designs) <= 12:
            ax.annotate(str(d.get("label", "")), (max(x, 1.0), y), textcoords="offset points",
                        xytext=(5, 4), fontsize=7)
    front = pareto_frontier(pts)
    ax.plot([p[0] for p in front], [p[1] for p in front], "--", color="grey", lw=1, label="frontier")
    ax.set_xscale("log")
    ax.set_xlabel("index memory (bytes, log scale)")
    ax.set_ylabel(f"modelled lookup time (µs, profile {doc.get('profile', '?')})")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title or f"AirTune design map: {doc.get('dataset', '')}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m strata.plot``."""
    ap = argparse.ArgumentParser(prog="python -m strata.plot", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="bench JSON Lines files (one JSON file for design-map)")
    ap.add_argument("--out", required=True, help="output image (PNG, SVG, PDF by extension)")
    ap.add_argument("--kind", default="pareto", choices=["pareto", "bars", "latency", "design-map"])
    ap.add_argument("--workload", default=None, help="workload to plot (pareto/latency; default lookup)")
    ap.add_argument("--workloads", default=None, help="comma-separated workloads to keep (bars)")
    ap.add_argument("--dataset", default=None, help="keep one dataset")
    ap.add_argument("--cache", default=None, help="keep one cache state (cold, os, lru:N)")
    ap.add_argument("--baseline", default=None, help="baseline kind or spec of the ratios (bars)")
    ap.add_argument("--y", default="pages", choices=["pages", "modelled", "latency"], help="y axis (pareto)")
    ap.add_argument("--title", default=None)
    a = ap.parse_args(argv)
    try:
        if a.kind == "design-map":
            with open(a.inputs[0], encoding="utf-8") as f:
                design_map(json.load(f), a.out, title=a.title)
        else:
            recs = load_jsonl(a.inputs)
            if a.kind == "pareto":
                pareto(recs, a.out, workload=a.workload or "lookup", y=a.y, dataset=a.dataset,
                       cache=a.cache, title=a.title)
            elif a.kind == "bars":
                wls = a.workloads.split(",") if a.workloads else None
                bars(recs, a.out, baseline=a.baseline, dataset=a.dataset, cache=a.cache,
                     workloads=wls, title=a.title)
            else:
                latency(recs, a.out, workload=a.workload or "lookup", dataset=a.dataset,
                        cache=a.cache, title=a.title)
    except (OSError, ValueError) as e:
        print(f"strata.plot: {e}", file=sys.stderr)
        return 2
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
