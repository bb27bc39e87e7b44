#!/usr/bin/env python3
"""Tables and the figure of docs/results/batched.md from
scripts/batched-experiments.sh output: `strata bench` JSON Lines
(lookups-t<threads>.jsonl, each kind at batch=1 and at batch=B,qd=Q) and
fio's JSON (fio-t<threads>-qd<Q>-{before,after}.json).

Usage: .venv/bin/python scripts/report_batched.py DIR > DIR/report.md
(from the repository root; ./scripts/test-python.sh makes .venv with matplotlib)

Prints Markdown: per thread count and kind, lookups/s at each queue depth
(median of the repeats, min-max), the ratio to the same kind one by one,
the share of fio's IOPS at that queue depth (fio: median of the runs before
and after), pages and read calls per lookup and `wrong`; then the
acceptance check of issue 19. Draws DIR/batched.png (needs matplotlib).
"""
import glob
import json
import os
import re
import statistics
import sys

from report_static import load  # same directory: JSON Lines, [] when missing


def spec_parts(spec):
    """(kind label, batch, qd) of a spec such as `btree:resident=none,batch=256,qd=8`."""
    kind, _, params = spec.partition(":")
    batch, qd, rest = 1, 1, []
    for p in params.split(",") if params else []:
        k, _, v = p.partition("=")
        if k == "batch":
            batch = int(v)
        elif k == "qd":
            qd = int(v)
        else:
            rest.append(p)
    label = kind + (":" + ",".join(rest) if rest else "")
    return label, batch, (qd if batch > 1 else 1)


def fio_iops(d, threads):
    """{qd: [iops of each run]} from fio's JSON files."""
    out = {}
    for f in glob.glob(os.path.join(d, f"fio-t{threads}-qd*-*.json")):
        m = re.search(r"-qd(\d+)-", os.path.basename(f))
        try:
            j = json.load(open(f))
        except (OSError, ValueError):
            continue
        iops = sum(job["read"]["iops"] for job in j.get("jobs", []))
        out.setdefault(int(m.group(1)), []).append(iops)
    return out


def med(xs):
    return statistics.median(xs) if xs else None


def main():
    d = sys.argv[1]
    rows = {}
    for f in sorted(glob.glob(os.path.join(d, "lookups-t*.jsonl"))):
        threads = int(re.search(r"-t(\d+)\.jsonl", f).group(1))
        for r in load(f):
            label, batch, qd = spec_parts(r["spec"])
            rows[(threads, label, batch, qd)] = r
    if not rows:
        print("no lookups-t*.jsonl in", d)
        return
    kernel = open(os.path.join(d, "kernel.txt")).read().strip() if os.path.exists(os.path.join(d, "kernel.txt")) else "?"
    print(f"Kernel {kernel}. Lookups/s: median of the repeats (min-max); ratio to the same kind one by one;"
          " % of fio's random 4 KiB IOPS at the same queue depth (median of fio before and after).\n")
    checks = []
    figure = {}
    for threads in sorted({k[0] for k in rows}):
        fio = fio_iops(d, threads)
        print(f"### {threads} thread{'s' if threads > 1 else ''}\n")
        qds = sorted({k[3] for k in rows if k[0] == threads and k[2] > 1})
        print("| queue depth | fio IOPS (runs) |")
        print("|---|---|")
        for q in sorted(set(qds) | {1}):
            runs = fio.get(q, [])
            print(f"| {q} | {med(runs) or 0:,.0f} ({', '.join(f'{x:,.0f}' for x in runs)}) |")
        print()
        print("| kind | path | lookups/s | ratio | % fio | pages / lookup | reads / lookup | p99 µs (batch) | wrong |")
        print("|---|---|---|---|---|---|---|---|---|")
        labels = sorted({k[1] for k in rows if k[0] == threads})
        for label in labels:
            base = rows.get((threads, label, 1, 1))
            base_t = base["throughput_ops_s"] if base else None
            keys = sorted((k for k in rows if k[0] == threads and k[1] == label), key=lambda k: (k[2] > 1, k[3]))
            for k in keys:
                r = rows[k]
                t = r["throughput_ops_s"]
                runs = r.get("throughput_runs") or [t]
                f = med(fio.get(k[3], []))
                io = r.get("io") or {}
                path = "one by one" if k[2] == 1 else f"batch {k[2]}, qd {k[3]}"
                ratio = t / base_t if base_t else None
                share = 100 * t / f if f else None
                print(f"| `{label}` | {path} | {t:,.0f} ({min(runs):,.0f}–{max(runs):,.0f}) | "
                      f"{'–' if ratio is None else f'{ratio:.2f}x'} | {'–' if share is None else f'{share:.0f} %'} | "
                      f"{io.get('pages_per_op', 0):.4f} | {io.get('reads_per_op', 0):.4f} | "
                      f"{r['latency_ns']['p99'] / 1e3:,.0f} | {r['wrong']} |")
                figure.setdefault((threads, label), []).append((k[3] if k[2] > 1 else None, t))
                if threads == 1 and k[3] == 32 and k[2] > 1 and label in ("gap-zonemap-d", "pgm-disk-cpr"):
                    checks.append((label, t, f, ratio, runs))
            figure.setdefault((threads, "fio"), [(q, med(v)) for q, v in sorted(fio.items())])
        print()
    if checks:
        print("### Acceptance (1 thread, queue depth 32)\n")
        for label, t, f, ratio, runs in checks:
            share = t / f if f else 0
            print(f"- `{label}`: {t:,.0f} lookups/s = {100 * share:.0f} % of fio's {f or 0:,.0f} IOPS "
                  f"(needs ≥ 70 %: {'yes' if share >= 0.7 else 'no'}); {ratio or 0:.2f}x one by one "
                  f"(needs ≥ 2.5x: {'yes' if (ratio or 0) >= 2.5 else 'no'}); slowest repeat {min(runs):,.0f}")
        print()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib missing: no figure)")
        return
    threads_list = sorted({k[0] for k in figure})
    fig, axes = plt.subplots(1, len(threads_list), figsize=(6.5 * len(threads_list), 4.5), squeeze=False)
    for ax, threads in zip(axes[0], threads_list):
        for (t, label), pts in sorted(figure.items()):
            if t != threads:
                continue
            batched = sorted((q, v) for q, v in pts if q is not None and v)
            if not batched:
                continue
            style = dict(color="black", linestyle="--", linewidth=2) if label == "fio" else {}
            ax.plot([q for q, _ in batched], [v / 1e3 for _, v in batched], marker="o", label=label, **style)
        ax.set_xscale("log", base=2)
        # Plain queue depths (1, 2, 4, ...), not 2^0, 2^1, ...
        depths = sorted({q for (t, _), pts in figure.items() if t == threads for q, v in pts if q and v})
        ax.set_xticks(depths)
        ax.set_xticklabels([str(q) for q in depths])
        ax.minorticks_off()
        ax.set_xlabel("queue depth (reads in flight)")
        ax.set_ylabel("thousand lookups/s (fio: reads/s)")
        ax.set_title(f"cold lookups, {threads} thread{'s' if threads > 1 else ''}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "batched.png"), dpi=120)


if __name__ == "__main__":
    main()
