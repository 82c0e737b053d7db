"""Draws docs/bench.svg from scripts/bench.sh's summary CSV.

Usage: bench_chart.py SUMMARY_CSV OUT_SVG TITLE SUBTITLE

Grouped bars: one group per command, one bar per path (the median
usec_per_call of the rounds), a line over each bar from the fastest to the
slowest round. A path that does not apply to a command has no bar.
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
# A fixed salt for the SVG's ids (and no date, below): the same figures
# give the same file.
matplotlib.rcParams["svg.hashsalt"] = "bench"
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

PATHS = [
    ("new", "new keys (-r 100000, flushed)", "#4c72b0"),
    ("warm", "1000 warm keys, admitted", "#55a868"),
    ("denied", "one key, always denied", "#c44e52"),
]


def read_summary(path):
    """{command: {path: (median, min, max)}}, commands in the file's order."""
    rows = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            figures = (float(row["median"]), float(row["min"]), float(row["max"]))
            rows.setdefault(row["command"], {})[row["path"]] = figures
    return rows


def draw(rows, out, title, subtitle):
    commands = list(rows)
    width = 0.27
    fig, ax = plt.subplots(figsize=(max(10, 1.0 * len(commands) + 2), 6))
    for slot, (path, label, color) in enumerate(PATHS):
        xs, medians, low, high = [], [], [], []
        for x, command in enumerate(commands):
            if path in rows[command]:
                median, least, most = rows[command][path]
                xs.append(x + (slot - 1) * width)
                medians.append(median)
                low.append(median - least)
                high.append(most - median)
        bars = ax.bar(xs, medians, width, label=label, color=color,
                      yerr=[low, high], capsize=2, error_kw={"elinewidth": 0.8})
        ax.bar_label(bars, labels=[f"{m:.2f}" for m in medians], fontsize=6,
                     padding=2, rotation=90)
    ax.set_xticks(range(len(commands)))
    ax.set_xticklabels(commands, rotation=35, ha="right", fontsize=8)
    # A log scale: the commands span 0.1 to 10+ usec, and on it equal
    # ratios look equal (RL.TOKENBUCKET to INCR as GCRA to INCR).
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.set_ylabel("usec_per_call (server time inside the command), log scale")
    ax.set_ylim(min(m for r in rows.values() for m, _, _ in r.values()) / 2,
                max(hi for r in rows.values() for _, _, hi in r.values()) * 3)
    ax.grid(axis="y", linewidth=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=11)
    ax.set_title(subtitle, fontsize=7, wrap=True)
    fig.tight_layout()
    # The format follows the file's name (a PNG to look at, say).
    metadata = {"Date": None} if out.endswith(".svg") else None
    fig.savefig(out, metadata=metadata, dpi=110)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    summary, out, title, subtitle = sys.argv[1:]
    draw(read_summary(summary), out, title, subtitle)


if __name__ == "__main__":
    main()
