#!/usr/bin/env python3
"""Box plots of per-repetition times as an SVG (standard library only).

    plot_boxplot.py -o OUT.svg [-t TITLE] [-s SUBTITLE] GROUP IMPL FILE [GROUP IMPL FILE ...]

Each FILE holds one sample per line (microseconds; blank lines and lines starting
with '#' are skipped; a line "<index> <us>" counts its last field). Samples are
grouped by GROUP (e.g. "4 ranks", along the x axis, in order of first appearance),
one box per IMPL within a group, coloured by IMPL. Each box shows min, p25, median,
p75 and max (whiskers to the extremes, as the box plots of Engwer et al.'s Figure 2), on
a logarithmic time axis in milliseconds. bench/ft_propagate.sh calls it for
experiment (a) and writes bench/ft_propagate.svg, with the run's host and commit as
the subtitle (a second title line): every box of one plot comes from one run.
"""

import argparse
import math
import sys
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def read_samples(path):
    """The samples of one file, in microseconds."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            out.append(float(line.split()[-1]))
    return out


def quantile(sorted_vals, q):
    """Linear-interpolation quantile of sorted values."""
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = q * (len(sorted_vals) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def five(vals):
    """min, p25, median, p75, max."""
    s = sorted(vals)
    return (s[0], quantile(s, 0.25), quantile(s, 0.5), quantile(s, 0.75), s[-1])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("-o", "--out", required=True, help="SVG file to write")
    ap.add_argument("-t", "--title", default="Duration of the propagation")
    ap.add_argument("-s", "--subtitle", default="", help="second title line, e.g. the run's host and commit")
    ap.add_argument("triples", nargs="+", help="GROUP IMPL FILE ...")
    args = ap.parse_args(argv)
    if len(args.triples) % 3:
        ap.error("arguments after the options come in threes: GROUP IMPL FILE")

    groups, impls, data = [], [], {}
    for i in range(0, len(args.triples), 3):
        g, impl, path = args.triples[i : i + 3]
        vals = read_samples(path)
        if not vals:
            print(f"plot_boxplot.py: {path}: no samples, skipped", file=sys.stderr)
            continue
        if g not in groups:
            groups.append(g)
        if impl not in impls:
            impls.append(impl)
        data.setdefault((g, impl), []).extend(vals)
    if not data:
        print("plot_boxplot.py: nothing to plot", file=sys.stderr)
        return 1

    # Milliseconds, log scale over whole decades around the data.
    all_ms = [v / 1e3 for vals in data.values() for v in vals if v > 0]
    lo_dec = math.floor(math.log10(min(all_ms)))
    hi_dec = math.ceil(math.log10(max(all_ms)))
    if hi_dec == lo_dec:
        hi_dec += 1

    width, height = max(640, 200 + 130 * len(groups) * len(impls)), 440
    left, right, top, bottom = 80, 20, 68 if args.subtitle else 50, 90
    plot_w, plot_h = width - left - right, height - top - bottom

    def y(ms):
        ms = max(ms, 10.0**lo_dec)
        return top + plot_h * (hi_dec - math.log10(ms)) / (hi_dec - lo_dec)

    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2:.1f}" y="22" text-anchor="middle" font-size="14">{escape(args.title)}</text>',
    ]
    if args.subtitle:
        svg.append(f'<text x="{width / 2:.1f}" y="42" text-anchor="middle">{escape(args.subtitle)}</text>')
    # Grid and y axis: decades labelled, 2 and 5 as light lines.
    for d in range(lo_dec, hi_dec + 1):
        for m in (1, 2, 5):
            v = m * 10.0**d
            if d == hi_dec and m > 1:
                continue
            yy = y(v)
            svg.append(
                f'<line x1="{left}" y1="{yy:.1f}" x2="{left + plot_w}" y2="{yy:.1f}" '
                f'stroke="{"#ccc" if m == 1 else "#eee"}"/>'
            )
            if m == 1:
                label = f"{v:g}"
                svg.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{label}</text>')
    svg.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>')
    svg.append(
        f'<text x="18" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 18 {top + plot_h / 2:.1f})">duration on rank 0 (ms, log scale)</text>'
    )

    # Boxes.
    group_w = plot_w / len(groups)
    box_w = min(50.0, group_w / (len(impls) + 1) * 0.7)
    for gi, g in enumerate(groups):
        gx = left + group_w * gi
        svg.append(
            f'<text x="{gx + group_w / 2:.1f}" y="{top + plot_h + 20}" text-anchor="middle">{escape(g)}</text>'
        )
        for ii, impl in enumerate(impls):
            vals = data.get((g, impl))
            if not vals:
                continue
            mn, q1, med, q3, mx = (v / 1e3 for v in five(vals))
            cx = gx + group_w * (ii + 1) / (len(impls) + 1)
            c = COLOURS[ii % len(COLOURS)]
            x0, x1 = cx - box_w / 2, cx + box_w / 2
            svg.append(f'<line x1="{cx:.1f}" y1="{y(mx):.1f}" x2="{cx:.1f}" y2="{y(q3):.1f}" stroke="{c}"/>')
            svg.append(f'<line x1="{cx:.1f}" y1="{y(q1):.1f}" x2="{cx:.1f}" y2="{y(mn):.1f}" stroke="{c}"/>')
            for v in (mn, mx):
                svg.append(
                    f'<line x1="{cx - box_w / 4:.1f}" y1="{y(v):.1f}" x2="{cx + box_w / 4:.1f}" '
                    f'y2="{y(v):.1f}" stroke="{c}"/>'
                )
            svg.append(
                f'<rect x="{x0:.1f}" y="{y(q3):.1f}" width="{box_w:.1f}" '
                f'height="{max(y(q1) - y(q3), 0.5):.1f}" fill="{c}" fill-opacity="0.25" stroke="{c}">'
                f"<title>{escape(impl)}, {escape(g)}: n={len(vals)} min {mn:.4g} p25 {q1:.4g} "
                f"median {med:.4g} p75 {q3:.4g} max {mx:.4g} ms</title></rect>"
            )
            svg.append(
                f'<line x1="{x0:.1f}" y1="{y(med):.1f}" x2="{x1:.1f}" y2="{y(med):.1f}" '
                f'stroke="{c}" stroke-width="2.5"/>'
            )
            svg.append(
                f'<text x="{x1 + 3:.1f}" y="{y(med) + 4:.1f}" font-size="10" fill="{c}">{med:.3g}</text>'
            )
    # Legend.
    lx = left
    for ii, impl in enumerate(impls):
        c = COLOURS[ii % len(COLOURS)]
        ly = height - 30
        svg.append(
            f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{c}" fill-opacity="0.25" stroke="{c}"/>'
        )
        svg.append(f'<text x="{lx + 18}" y="{ly}">{escape(impl)}</text>')
        lx += 30 + 8 * len(impl)
    svg.append(
        f'<text x="{width - right}" y="{height - 10}" text-anchor="end" font-size="10" fill="#555">'
        "whiskers: min and max; box: p25 to p75; bar: median</text>"
    )
    svg.append("</svg>")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(svg) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
