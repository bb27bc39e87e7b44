"""Figures from ``strata bench`` JSON Lines (and from AirTune's design JSON).

Command line::

    python -m strata.plot RESULTS.jsonl [MORE.jsonl ...] --out FIG.png \\
        [--kind pareto|bars|latency|design-map] [--workload lookup] [--baseline btree] [--title TEXT]

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
series (``spec @ dataset``) unless ``--dataset`` selects one. Every title
names the data set(s) plotted (appended in parentheses to a ``--title`` that
does not), log axes are labelled with plain numbers (1, 2, 5, 10, 1k, ...),
and labels and legends are kept inside the figure, off the data.
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


def _plain(v: float) -> str:
    """A tick value as a plain number: 0.5, 3, 40, 1k, 25k, 2M, 1G."""
    if v <= 0 or not math.isfinite(v):
        return ""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def plain_log_axis(axis: Any) -> None:
    """Labels a log-scaled ``axis`` with plain numbers: every power of ten, and
    2, 3, 5 (or 2, 5) times one only where the axis spans less than one (two)
    decades, so that no two labels overlap. Call after ``set_xscale("log")``."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10))
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _plain(v)))

    def minor(v: float, _pos: Any) -> str:
        lo, hi = sorted(axis.get_view_interval())
        if lo <= 0 or v <= 0 or hi / lo > 100:
            return ""
        mantissa = round(v / 10 ** math.floor(math.log10(v) + 1e-9))
        return _plain(v) if mantissa in ((2, 3, 5) if hi / lo <= 10 else (2, 5)) else ""

    axis.set_minor_formatter(FuncFormatter(minor))


def _datasets(rs: Sequence[Record]) -> List[str]:
    out: List[str] = []
    for r in rs:
        d = r.get("dataset")
        if d and str(d) not in out:
            out.append(str(d))
    return out


def _title(title: Optional[str], default: str, datasets: Sequence[str]) -> str:
    """``title`` (or ``default`` after the data sets' names), with the data
    sets appended when it names none of them."""
    names = ", ".join(datasets)
    if title is None:
        return f"{names}: {default}" if names else default
    if names and not any(d in title for d in datasets):
        return f"{title} ({names})"
    return title


def spread_labels(ax: Any, texts: Sequence[Any]) -> None:
    """Places point labels (annotations offset from their point) so that none
    overlaps a point or a label placed before it: each goes above right of its
    point, else below right, above left or below left, else below the others."""
    if len(texts) < 2:
        return
    from matplotlib.transforms import Bbox

    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # The other points are obstacles too (about a marker's size).
    r = 4.0 * fig.dpi / 72.0
    points = [ax.transData.transform(t.xy) for t in texts]
    dots = [Bbox.from_extents(x - r, y - r, x + r, y + r) for x, y in points]
    placed: List[Any] = []
    for i, t in enumerate(texts):
        dx, dy = t.xyann
        tries = [(dx, dy, "left"), (dx, -dy - 8, "left"), (-dx, dy, "right"), (-dx, -dy - 8, "right")]
        obstacles = placed + dots[:i] + dots[i + 1:]
        for x, y, ha in tries:
            t.xyann = (x, y)
            t.set_ha(ha)
            if not any(t.get_window_extent(renderer).overlaps(b) for b in obstacles):
                break
        else:
            t.xyann = (dx, dy)
            t.set_ha("left")
            for _ in range(len(texts)):
                box = t.get_window_extent(renderer)
                hit = next((b for b in placed if box.overlaps(b)), None)
                if hit is None:
                    break
                t.xyann = (t.xyann[0], t.xyann[1] - (box.y1 - hit.y0 + 1.0) * 72.0 / fig.dpi)
        placed.append(t.get_window_extent(renderer))


def _widen(lim: Tuple[float, float], log: bool, low: float, high: float) -> Tuple[float, float]:
    """``lim`` with its ends moved out by ``low`` and ``high`` of its span."""
    lo, hi = lim
    if log:
        a, b = math.log10(lo), math.log10(hi)
        return 10 ** (a - (b - a) * low), 10 ** (b + (b - a) * high)
    return lo - (hi - lo) * low, hi + (hi - lo) * high


def fit_labels(ax: Any, texts: Sequence[Any], pad_px: float = 4.0) -> None:
    """Widens ``ax``'s x and y ranges until every text of ``texts`` (bar
    labels, point labels) lies inside the frame, on linear or log axes (a bar
    axis starting at 0 keeps its 0)."""
    if not texts:
        return
    fig = ax.figure
    for _ in range(8):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        f = ax.get_window_extent(renderer)
        boxes = [t.get_window_extent(renderer) for t in texts]
        over = {
            "left": f.x0 - min(b.x0 for b in boxes) + pad_px,
            "right": max(b.x1 for b in boxes) - f.x1 + pad_px,
            "bottom": f.y0 - min(b.y0 for b in boxes) + pad_px,
            "top": max(b.y1 for b in boxes) - f.y1 + pad_px,
        }
        if all(v <= 0 for v in over.values()):
            return

        def share(v: float, size: float) -> float:
            return max(v, 0.0) / max(size - max(v, 0.0), 1.0)

        if over["left"] > 0 or over["right"] > 0:
            ax.set_xlim(*_widen(ax.get_xlim(), ax.get_xscale() == "log",
                                share(over["left"], f.width), share(over["right"], f.width)))
        if over["bottom"] > 0 or over["top"] > 0:
            lo = ax.get_ylim()[0]
            low = 0.0 if lo == 0 else share(over["bottom"], f.height)
            ax.set_ylim(*_widen(ax.get_ylim(), ax.get_yscale() == "log", low, share(over["top"], f.height)))


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
    labels: List[Any] = []
    by_ds: Dict[Any, List[Tuple[float, float]]] = {}
    for r in rs:
        yv = _y_value(r, y)
        bits = r.get("bits_per_key")
        if yv is None or bits is None:
            skipped.append(_label(r, multi))
            continue
        x = max(float(bits), 1e-3)
        ax.scatter([x], [yv], s=40, zorder=3)
        labels.append(ax.annotate(_label(r, multi), (x, yv), textcoords="offset points", xytext=(5, 4),
                                  fontsize=8))
        by_ds.setdefault(r.get("dataset"), []).append((x, float(yv)))
    for ds, pts in by_ds.items():
        front = pareto_frontier(pts)
        ax.plot([p[0] for p in front], [p[1] for p in front], "--", color="grey", lw=1, zorder=2,
                label=f"Pareto frontier ({ds})" if multi else "Pareto frontier")
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    ax.set_xlabel("memory (bits per key, log scale)")
    ax.set_ylabel(_Y_LABEL[y])
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(_title(title, f"{workload}, memory vs I/O", _datasets(rs)))
    ax.legend(fontsize=8, loc="best")
    if skipped:
        fig.text(0.01, 0.01, f"not shown (no {y} data): {', '.join(sorted(set(skipped)))}", fontsize=7)
    fig.tight_layout(rect=(0, 0.04 if skipped else 0, 1, 1))
    spread_labels(ax, labels)
    fit_labels(ax, labels)
    fig.savefig(out, dpi=120, bbox_inches="tight")
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
    labels: List[Any] = []
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
            labels.append(ax.annotate(f"{ratio:.2f}×", (b.get_x() + b.get_width() / 2, b.get_height()),
                                      textcoords="offset points", xytext=(0, 2), ha="center", va="bottom",
                                      fontsize=7, rotation=90))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g[1] for g in groups], fontsize=8)
    ax.set_ylabel("throughput (kops/s)")
    # Log scale only when throughputs span more than 30x (cold vs warm runs).
    tputs = [float(r["throughput_ops_s"]) for r in rs if float(r["throughput_ops_s"]) > 0]
    if tputs and max(tputs) / min(tputs) > 30:
        ax.set_yscale("log")
        plain_log_axis(ax.yaxis)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.set_title(_title(title, f"throughput; labels: ratio to {baseline or 'the first index'}", _datasets(rs)))
    ax.legend(fontsize=8, ncol=min(len(names), 4), loc="upper center", bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    fit_labels(ax, labels)
    fig.savefig(out, dpi=120, bbox_inches="tight")
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
    plain_log_axis(ax.xaxis)
    ax.set_yticks([-math.log10(0.5), 2, 3, top])
    ax.set_yticklabels(["p50", "p99", "p99.9", "max"])
    ax.set_xlabel("latency (µs, log scale)")
    ax.set_ylabel("quantile")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(_title(title, f"{workload} latency distribution", _datasets(rs)))
    # Beside the axes: CDFs fill the plot from corner to corner.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)


def design_map(doc: Dict[str, Any], out: str, title: Optional[str] = None) -> None:
    """AirTune's design map: memory against modelled latency of every candidate design."""
    plt = _plt()
    designs = doc.get("designs")
    if not isinstance(designs, list) or not designs:
        raise ValueError('design map JSON needs a non-empty "designs" list')
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pts = []
    labels: List[Any] = []
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
            labels.append(ax.annotate(str(d.get("label", "")), (max(x, 1.0), y), textcoords="offset points",
                                      xytext=(5, 4), fontsize=7))
    front = pareto_frontier(pts)
    ax.plot([p[0] for p in front], [p[1] for p in front], "--", color="grey", lw=1, label="frontier")
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    ax.set_xlabel("index memory (bytes, log scale)")
    ax.set_ylabel(f"modelled lookup time (µs, profile {doc.get('profile', '?')})")
    ax.grid(True, which="both", alpha=0.3)
    ds = [str(doc["dataset"])] if doc.get("dataset") else []
    ax.set_title(_title(title, "AirTune design map", ds))
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    spread_labels(ax, labels)
    fit_labels(ax, labels)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m strata.plot``."""
    ap = argparse.ArgumentParser(
        prog="python -m strata.plot",
        description="Figures from the JSON Lines that `strata bench` and strata.bench() write "
                    "(and from AirTune's design JSON).",
        epilog="Example: python -m strata.plot osm.jsonl --kind bars --baseline btree --out osm-bars.png",
    )
    ap.add_argument("inputs", nargs="+", help="bench JSON Lines files (one JSON file for design-map)")
    ap.add_argument("--out", required=True, help="output image (PNG, SVG, PDF by extension)")
    ap.add_argument(
        "--kind", default="pareto", choices=["pareto", "bars", "latency", "design-map"],
        help="pareto: memory (bits/key) against I/O per operation with the Pareto frontier; "
             "bars: throughput per index and workload, each bar labelled with its ratio to the baseline; "
             "latency: latency CDFs from the percentiles; "
             "design-map: AirTune's candidate designs, memory against modelled time "
             "(input: one JSON document, see the module's docstring) (default: %(default)s)")
    ap.add_argument("--workload", default=None, help="workload to plot (pareto/latency; default lookup)")
    ap.add_argument("--workloads", default=None, help="comma-separated workloads to keep (bars)")
    ap.add_argument("--dataset", default=None, help="keep one dataset")
    ap.add_argument("--cache", default=None, help="keep one cache state (cold, os, lru:N)")
    ap.add_argument("--baseline", default=None, help="baseline kind or spec of the ratios (bars)")
    ap.add_argument("--y", default="pages", choices=["pages", "modelled", "latency"], help="y axis (pareto)")
    ap.add_argument("--title", default=None,
                    help="title of the figure (default: the data sets, then what the figure shows; "
                         "the data sets are appended when TITLE names none of them)")
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
