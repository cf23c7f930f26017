#!/usr/bin/env bash
# plots.sh - SVG plots of the benchmark tables (bench/data/*.csv) with gnuplot.
#
# Reads the CSV files the benchmark scripts write, each with the header
#   test,ranks,size,impl,config,median,min,max,unit,host,date,commit
# (size in bytes, 0 for barrier, detection and start-up rows; unit us, MB/s, Mmsg/s,
# ms or s; host, date and commit say where, when and at which commit the row was
# measured: bench/lib.sh `provenance`; a file in the older form without the last three
# columns is read as one run of unknown host, date and commit), and renders one SVG
# per plot, every point the median with a min-max bar. A run is one host and commit.
# Each plot draws the rows of one run only, the latest that has rows for it (by date),
# and names its host, commit and date in its title and in README.md; --host and
# --commit draw only that host's or commit's rows instead:
#   shm.csv      point to point (latency, bw, bibw): value vs message size, one line per
#                implementation, per config                    shm-<test>-<config>.svg
#                mbw_mr: rate vs message size, per rank count
#                and config                                    shm-mbw_mr-<N>ranks-<config>.svg
#                collectives (bcast, reduce, allreduce, allgather, alltoall): latency
#                vs size, per rank count and config            shm-<test>-<N>ranks-<config>.svg
#                barrier: latency, one point per implementation, per rank count
#                and config                                    shm-barrier-<N>ranks-<config>.svg
#   fabric.csv   latency, bw (any point-to-point test) vs size over libfabric, one line
#                per implementation (and transport)            fabric-<test>.svg
#   detect.csv   failure-detection latency per rank count, one point per implementation,
#                per test (detect_kill, detect_stop)           detect-kill.svg, detect-stop.svg
#   startup.csv  start-up time vs ranks, one line per implementation and config
#                                                              startup.svg
# A missing CSV is skipped with a note; a malformed one (header, field count, numbers,
# unit, unknown test, empty host or commit, a date that is neither a UTC ISO date nor
# "unknown", a duplicate row within one run) stops the script with the file and line. When a
# test has rows in two units (mbw_mr: MB/s and Mmsg/s) the unit joins the file name.
# Size 0 cannot sit on the logarithmic size axis: those rows are left out of the size
# plots (README.md says so). Also writes <out>/README.md, one line per SVG saying what it
# shows and which CSV it came from, and removes SVGs of this naming scheme that the
# data no longer produces. Output is reproducible: no dates but the data's, no absolute
# paths.
#
# Needs gnuplot (Debian gnuplot-nox, installed by ci-containers/install-deps.sh) and
# python3 (standard library only), which splits the CSVs into one data file per series.
# `make plots` runs it with the defaults (`make plots PLOTS_FLAGS="--host H --commit C"`
# for one run).

set -euo pipefail

usage() {
    cat <<EOF
usage: bench/plots.sh [--data DIR] [--out DIR] [--host HOST] [--commit COMMIT]
  --data DIR       where the CSV files are (default bench/data)
  --out DIR        where the SVGs and README.md go (default bench/plots)
  --host HOST      draw only rows of this host (the CSVs' host column, e.g. vm-2c)
  --commit COMMIT  draw only rows of this commit (the CSVs' commit column)
                   (default: every plot draws the latest run, host and commit, that
                   has rows for it; a plot no selected row makes is not drawn)
  -h, --help       this help
EOF
}

prog=plots.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

data=""
out=""
sel_host=""
sel_commit=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --data | --out | --host | --commit)
            [[ $# -ge 2 && -n "$2" ]] || { usage >&2; exit 2; }
            case "$1" in
                --data) data=$2 ;;
                --out) out=$2 ;;
                --host) sel_host=$2 ;;
                --commit) sel_commit=$2 ;;
            esac
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            usage >&2
            exit 2
            ;;
    esac
    shift
done
# Paths as the user gave them (shown in messages and README.md) and as used.
data_shown=${data:-bench/data}
out_shown=${out:-bench/plots}
data=${data:-$root/bench/data}
out=${out:-$root/bench/plots}
data_shown=${data_shown%/}
out_shown=${out_shown%/}

command -v gnuplot >/dev/null 2>&1 ||
    die "gnuplot not found: install it with 'bash ci-containers/install-deps.sh' (Debian package gnuplot-nox)"
command -v python3 >/dev/null 2>&1 || die "python3 not found (needed to split the CSV files)"
[[ -d "$data" ]] || log "no directory $data_shown: no data, no plots"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rt-plots.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Splits the CSVs into $tmp: NNN.gp (a gnuplot script writing NNN.svg), NNN-S.dat (one
# series: x median min max), manifest.tsv (NNN <tab> file name) and README.md.
# shellcheck disable=SC2016  # python source, not shell
split_py=$(
    cat <<'PY'
import csv
import math
import os
import re
import sys
from collections import namedtuple

data_dir, data_shown, tmp, sel_host, sel_commit = sys.argv[1:6]

HEADER = ["test", "ranks", "size", "impl", "config", "median", "min", "max", "unit", "host", "date", "commit"]
LEGACY_HEADER = HEADER[:9]
UNITS = ["us", "MB/s", "Mmsg/s", "ms", "s"]
P2P = ["latency", "bw", "bibw", "mbw_mr"]
COLLS = ["bcast", "reduce", "allreduce", "allgather", "alltoall"]
DETECT = ["detect_kill", "detect_stop"]
TESTS = P2P + ["barrier"] + COLLS + DETECT + ["startup"]
HIGHER_IS_BETTER = {"bw", "bibw", "mbw_mr"}
WHAT = {
    "latency": "latency",
    "bw": "bandwidth",
    "bibw": "bi-directional bandwidth",
    "mbw_mr": "multi-pair bandwidth / message rate",
    "barrier": "barrier latency",
    "bcast": "bcast latency",
    "reduce": "reduce latency",
    "allreduce": "allreduce latency",
    "allgather": "allgather latency",
    "alltoall": "alltoall latency",
    "detect_kill": "failure detection latency, victim SIGKILLed",
    "detect_stop": "failure detection latency, victim SIGSTOPped",
    "startup": "start-up time",
}
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
TERMINAL = 'set terminal svg size 800,500 dynamic enhanced font "sans,12"'
POINTS = [7, 5, 9, 11, 13, 4, 6, 8]
DASHES = [1, 2, 3, 4, 5]

Row = namedtuple("Row", "line test ranks size impl config median min max unit host date commit")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z)?$")


def fail(msg):
    print(f"plots.sh: {msg}", file=sys.stderr)
    sys.exit(1)


def note(msg):
    print(f"plots.sh: {msg}", file=sys.stderr)


def number(shown, n, field, text, kind):
    try:
        v = kind(text)
    except ValueError:
        fail(f"{shown}:{n}: {field} is {text!r}, not a {'whole ' if kind is int else ''}number")
    if kind is float and not math.isfinite(v):
        fail(f"{shown}:{n}: {field} is {text!r}, not a finite number")
    if v < 0:
        fail(f"{shown}:{n}: {field} is {text!r}, negative")
    return v


def read(name):
    """The rows of data_dir/name, checked; None when the file does not exist."""
    path = os.path.join(data_dir, name)
    shown = f"{data_shown}/{name}"
    if not os.path.exists(path):
        note(f"no {shown}, its plots skipped")
        return None
    with open(path, newline="", encoding="utf-8-sig") as f:
        lines = list(csv.reader(f))
    header = [c.strip() for c in lines[0]] if lines else []
    if header not in (HEADER, LEGACY_HEADER):
        got = f"header is {','.join(lines[0])!r}" if lines else "file is empty"
        fail(f"{shown}: {got}, expected the header {','.join(HEADER)!r}")
    if header == LEGACY_HEADER:
        note(f"{shown}: no host, date and commit columns: its rows are one run of unknown provenance")
    rows, seen = [], {}
    for n, fields in enumerate(lines[1:], start=2):
        if not any(c.strip() for c in fields):
            continue
        if len(fields) != len(header):
            fail(f"{shown}:{n}: {len(fields)} fields, expected {len(header)}")
        fields = [c.strip() for c in fields] + ["unknown"] * (len(HEADER) - len(header))
        test, ranks, size, impl, config, med, lo, hi, unit, host, date, commit = fields
        if test not in TESTS:
            fail(f"{shown}:{n}: unknown test {test!r} (known: {' '.join(TESTS)})")
        if unit not in UNITS:
            fail(f"{shown}:{n}: unknown unit {unit!r} (known: {' '.join(UNITS)})")
        if not impl or not config:
            fail(f"{shown}:{n}: empty impl or config")
        if not host or not commit:
            fail(f"{shown}:{n}: empty host or commit (write unknown when it is not known)")
        if date != "unknown" and not DATE.match(date):
            fail(f"{shown}:{n}: date is {date!r}, not a UTC ISO date (2026-11-26 or 2026-11-26T19:20:10Z) or unknown")
        row = Row(n, test, number(shown, n, "ranks", ranks, int), number(shown, n, "size", size, int),
                  impl, config, number(shown, n, "median", med, float), number(shown, n, "min", lo, float),
                  number(shown, n, "max", hi, float), unit, host, date, commit)
        if not row.min <= row.median <= row.max:
            fail(f"{shown}:{n}: expected min <= median <= max, got {lo}, {med}, {hi}")
        key = (test, row.ranks, row.size, impl, config, unit, host, commit)
        if key in seen:
            fail(f"{shown}:{n}: same test, ranks, size, impl, config, unit, host and commit as line {seen[key]}")
        seen[key] = n
        rows.append(row)
    if not rows:
        note(f"{shown} has no rows, its plots skipped")
        return None
    if sel_host or sel_commit:
        rows = [r for r in rows if (not sel_host or r.host == sel_host) and (not sel_commit or r.commit == sel_commit)]
        if not rows:
            want = " and ".join(x for x in (sel_host and f"host {sel_host}", sel_commit and f"commit {sel_commit}") if x)
            note(f"{shown} has no rows of {want}, its plots skipped")
            return None
    return rows


def run_key(r):
    return (r.host, r.commit)


def newest(rows):
    """The latest date of the rows ('' when none is known), for ordering runs."""
    return max(("" if r.date == "unknown" else r.date) for r in rows)


def one_run(name, rows):
    """The rows of one run (host and commit): the one with the latest date among `rows`
    (ties: the greater host, then commit), so that a plot never mixes runs."""
    runs = {}
    for r in rows:
        runs.setdefault(run_key(r), []).append(r)
    best = max(runs, key=lambda k: (newest(runs[k]), k))
    if len(runs) > 1:
        left = len(rows) - len(runs[best])
        note(f"{name}: drawing host {best[0]}, commit {best[1]}; {left} rows of {len(runs) - 1} other run(s) left out")
    return runs[best]


def run_label(rows):
    """'host H, commit C, DATE' of the rows of one run."""
    days = sorted({r.date[:10] for r in rows if r.date != "unknown"})
    when = "date unknown" if not days else days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    return f"host {rows[0].host}, commit {rows[0].commit}, {when}"


def impl_order(impls):
    """runthrough first, then the others by name: the same order (and colour) in every plot."""
    return sorted(set(impls), key=lambda i: (i != "runthrough", i.lower(), i))


def config_order(configs):
    return sorted(set(configs), key=lambda c: (c != "defaults", c != "tuned", c))


def gq(s):
    """A gnuplot single-quoted string (no escapes are processed in it)."""
    return "'" + s.replace("'", "''") + "'"


def gq_lines(*lines):
    """A gnuplot double-quoted string of several lines (its backslashes and quotes escaped)."""
    return '"' + "\\n".join(x.replace("\\", "\\\\").replace('"', '\\"') for x in lines) + '"'


def num(v):
    return f"{v:.10g}"


def size_label(b):
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return f"{b >> 20}M"
    if b >= 1 << 10 and b % (1 << 10) == 0:
        return f"{b >> 10}K"
    return str(b)


def ylabel(test, unit):
    if test.startswith("detect_"):
        what = "detection latency"
    elif test == "mbw_mr":
        what = "message rate" if unit == "Mmsg/s" else "aggregate bandwidth"
    else:
        what = WHAT[test]
    return f"{what} ({unit})"


def upper_first(s):
    return s[:1].upper() + s[1:]


def unit_slug(unit):
    return "".join(c for c in unit if c.isalnum())


def by_unit(rows):
    """(unit, rows, file-name part) per unit; the part is empty when there is only one."""
    units = [u for u in UNITS if any(r.unit == u for r in rows)]
    return [(u, [r for r in rows if r.unit == u], f"-{unit_slug(u)}" if len(units) > 1 else "") for u in units]


ALL_IMPLS = []
plots = []  # (file name, description, gnuplot script, [series data])


def series_of(rows, fields):
    """Rows grouped into series by impl plus those of `fields` that vary in `rows`.

    Returns [(label, style, rows)] in a fixed order; the label is the impl, followed by
    the varying fields in parentheses."""
    varying = [f for f in fields if len({getattr(r, f) for r in rows}) > 1]
    configs = config_order(r.config for r in rows)
    keys = sorted({(r.impl,) + tuple(getattr(r, f) for f in varying) for r in rows},
                  key=lambda k: (ALL_IMPLS.index(k[0]),
                                 tuple(configs.index(v) if f == "config" else v for f, v in zip(varying, k[1:]))))
    out = []
    for k in keys:
        extra = []
        for f, v in zip(varying, k[1:]):
            extra.append(f"{v} ranks" if f == "ranks" else f"{v} B" if f == "size" else str(v))
        label = k[0] + (f" ({', '.join(extra)})" if extra else "")
        colour = COLOURS[ALL_IMPLS.index(k[0]) % len(COLOURS)]
        cidx = configs.index(k[1 + varying.index("config")]) if "config" in varying else 0
        style = f"lc rgb {gq(colour)} dt {DASHES[cidx % len(DASHES)]} pt {POINTS[cidx % len(POINTS)]} ps 0.7 lw 1.5"
        srows = [r for r in rows if (r.impl,) + tuple(getattr(r, f) for f in varying) == k]
        out.append((label, style, srows))
    return out


def preamble(title, xlabel, ylabel, rows):
    """The common settings; the title's second line names the run the rows come from."""
    return "\n".join([
        "set encoding utf8",
        f"set title {gq_lines(title, run_label(rows))} noenhanced",
        f"set xlabel {gq(xlabel)} noenhanced",
        f"set ylabel {gq(ylabel)} noenhanced",
        "set grid xtics ytics",
        "set key outside right top vertical Left reverse box noenhanced",
        "set bars small",
    ])


def y_axis(rows, log=False):
    """The y-axis settings and the rows it can show: log (base 10) when `log` or when the
    values span more than a factor 20, else linear from 0; padded so bars clear the frame."""
    pos = [r for r in rows if r.median > 0]
    lows = [r.min for r in pos if r.min > 0]
    if pos and (log or (lows and max(r.max for r in rows) / min(lows) > 20)):
        lo, hi = min(lows or [r.median for r in pos]) / 1.5, max(r.max for r in pos) * 1.5
        if math.floor(math.log10(hi)) - math.ceil(math.log10(lo)) < 1:
            # Fewer than two powers of ten inside: no labelled tics; widen to whole decades.
            lo, hi = 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi))
        return ["set logscale y 10", "set format y '%g'", f"set yrange [{num(lo)}:{num(hi)}]"], pos
    hi = max(r.max for r in rows)
    return [f"set yrange [0:{num(hi * 1.08) if hi > 0 else 1}]"], rows


def direction(test):
    return "higher is better" if test in HIGHER_IS_BETTER else "lower is better"


def add_plot(name, desc, script, series, source, rows):
    plots.append((name, f"{desc} From `{source}`, {run_label(rows)}.", script, series))


def vs_size(name, rows, title, what, source, split_fields):
    """Median (min-max bars) vs message size on log2 x and log y, a line per series."""
    shown = [r for r in rows if r.size > 0 and r.median > 0]
    if not shown:
        note(f"{name}: no row with size > 0 and median > 0, not drawn")
        return
    test, unit = rows[0].test, rows[0].unit
    sizes = sorted({r.size for r in shown})
    lo, hi = sizes[0], sizes[-1]
    if lo == hi:
        lo, hi = lo / 2, hi * 2
    tics = ", ".join(f"{gq(size_label(s))} {s}" for s in sizes)
    series = series_of(shown, split_fields)
    lines = [preamble(title, "message size (bytes, K = 1024)", ylabel(test, unit), rows),
             "set logscale x 2", *y_axis(shown, log=True)[0],
             f"set xrange [{num(lo / 1.4)}:{num(hi * 1.4)}]", f"set xtics ({tics})"]
    if len(sizes) > 12:
        lines.append("set xtics rotate by -45")
    plot = []
    data = []
    for j, (label, style, srows) in enumerate(series):
        data.append(sorted((r.size, r.median, r.min, r.max) for r in srows))
        plot.append(f"@@DAT{j}@@ using 1:2:3:4 with yerrorlines {style} title {gq(label)} noenhanced")
    lines.append("plot " + ", \\\n     ".join(plot))
    dropped = " Size 0 is not shown (log axis)." if any(r.size == 0 for r in rows) else ""
    labels = ", ".join(lbl for lbl, _, _ in series)
    desc = f"{what} in {unit} ({direction(test)}) vs message size; median with min-max bars; lines: {labels}.{dropped}"
    add_plot(name, desc, "\n".join(lines), data, source, rows)


def per_group(name, rows, title, what, source, split_fields):
    """One point (min-max bar) per series within each rank count on the x axis."""
    test, unit = rows[0].test, rows[0].unit
    ranks = sorted({r.ranks for r in rows})
    yscale, rows = y_axis(rows)
    if not rows:
        note(f"{name}: no row with median > 0, not drawn")
        return
    series = series_of(rows, split_fields)
    width = 0.7 / max(len(series), 1)
    tics = ", ".join(f"{gq(f'{n} ranks')} {i}" for i, n in enumerate(ranks))
    lines = [preamble(title, "job size", ylabel(test, unit), rows),
             *yscale, f"set xrange [-0.5:{len(ranks) - 0.5}]", f"set xtics ({tics})", "set grid noxtics"]
    plot, data = [], []
    for j, (label, style, srows) in enumerate(series):
        off = (j - (len(series) - 1) / 2) * width
        data.append(sorted((ranks.index(r.ranks) + off, r.median, r.min, r.max) for r in srows))
        plot.append(f"@@DAT{j}@@ using 1:2:3:4 with yerrorbars {style} title {gq(label)} noenhanced")
    lines.append("plot " + ", \\\n     ".join(plot))
    labels = ", ".join(lbl for lbl, _, _ in series)
    desc = (f"{what} in {unit} ({direction(test)}) per job size ({', '.join(map(str, ranks))} ranks); "
            f"median with min-max bars; points: {labels}.")
    add_plot(name, desc, "\n".join(lines), data, source, rows)


def vs_ranks(name, rows, title, what, source, split_fields):
    """Median (min-max bars) vs ranks, a line per series."""
    test, unit = rows[0].test, rows[0].unit
    yscale, rows = y_axis(rows)
    ranks = sorted({r.ranks for r in rows})
    series = series_of(rows, split_fields)
    tics = ", ".join(f"{gq(str(n))} {n}" for n in ranks)
    lines = [preamble(title, "ranks", ylabel(test, unit), rows), *yscale, f"set xtics ({tics})"]
    if ranks and ranks[0] > 0:
        lines += ["set logscale x 2", f"set xrange [{num(ranks[0] / 1.4)}:{num(ranks[-1] * 1.4)}]"]
    plot, data = [], []
    for j, (label, style, srows) in enumerate(series):
        data.append(sorted((r.ranks, r.median, r.min, r.max) for r in srows))
        plot.append(f"@@DAT{j}@@ using 1:2:3:4 with yerrorlines {style} title {gq(label)} noenhanced")
    lines.append("plot " + ", \\\n     ".join(plot))
    labels = ", ".join(lbl for lbl, _, _ in series)
    desc = f"{what} in {unit} ({direction(test)}) vs ranks; median with min-max bars; lines: {labels}."
    add_plot(name, desc, "\n".join(lines), data, source, rows)


def skip_others(rows, wanted, shown):
    for t in TESTS:
        if t not in wanted and any(r.test == t for r in rows):
            note(f"{shown}: no plot for test {t} in this file, its rows skipped")
    return [r for r in rows if r.test in wanted]


def rank_words(rows):
    ranks = sorted({r.ranks for r in rows})
    return f"{ranks[0]} ranks" if len(ranks) == 1 else ""


files = {name: read(name) for name in ["shm.csv", "fabric.csv", "detect.csv", "startup.csv"]}
ALL_IMPLS = impl_order(r.impl for rows in files.values() if rows for r in rows)

rows = files["shm.csv"]
if rows:
    src = f"{data_shown}/shm.csv"
    rows = skip_others(rows, P2P + ["barrier"] + COLLS, src)
    for config in config_order(r.config for r in rows):
        crows = [r for r in rows if r.config == config]
        for test in P2P:
            # mbw_mr runs at several rank counts (pairs), each its own compare.sh run:
            # one plot per rank count, as the collectives.
            trows = [r for r in crows if r.test == test]
            groups = [(f"-{n}ranks", [r for r in trows if r.ranks == n]) for n in sorted({r.ranks for r in trows})] \
                if test == "mbw_mr" else [("", trows)]
            for rpart, grows in groups:
                for unit, urows, part in by_unit(grows):
                    name = f"shm-{test}{rpart}{part}-{config}.svg"
                    urows = one_run(name, urows)
                    rw = rank_words(urows)
                    title = f"shm {test}, config {config}{', ' + rw if rw else ''} ({unit}, {direction(test)})"
                    what = f"Shared memory {WHAT[test]}, config {config}{', ' + rw if rw else ''},"
                    vs_size(name, urows, title, what, src, ["ranks"])
        # Each rank count is its own compare.sh run: one plot per rank count.
        brows = [r for r in crows if r.test == "barrier"]
        for n in sorted({r.ranks for r in brows}):
            for unit, urows, part in by_unit([r for r in brows if r.ranks == n]):
                name = f"shm-barrier-{n}ranks{part}-{config}.svg"
                urows = one_run(name, urows)
                title = f"shm barrier, {n} ranks, config {config} ({unit}, lower is better)"
                what = f"Shared memory barrier latency on {n} ranks, config {config},"
                per_group(name, urows, title, what, src, ["size"])
        for test in COLLS:
            trows = [r for r in crows if r.test == test]
            for n in sorted({r.ranks for r in trows}):
                for unit, urows, part in by_unit([r for r in trows if r.ranks == n]):
                    name = f"shm-{test}-{n}ranks{part}-{config}.svg"
                    urows = one_run(name, urows)
                    title = f"shm {test}, {n} ranks, config {config} ({unit}, lower is better)"
                    what = f"Shared memory {WHAT[test]} on {n} ranks, config {config},"
                    vs_size(name, urows, title, what, src, [])

rows = files["fabric.csv"]
if rows:
    src = f"{data_shown}/fabric.csv"
    rows = skip_others(rows, P2P, src)
    for test in P2P:
        for unit, urows, part in by_unit([r for r in rows if r.test == test]):
            name = f"fabric-{test}{part}.svg"
            urows = one_run(name, urows)
            rw = rank_words(urows)
            configs = config_order(r.config for r in urows)
            over = f"libfabric {configs[0]}" if len(configs) == 1 else "libfabric"
            title = f"{test} over {over}{', ' + rw if rw else ''} ({unit}, {direction(test)})"
            what = f"{upper_first(WHAT[test])} over {over}{', ' + rw if rw else ''},"
            vs_size(name, urows, title, what, src, ["config", "ranks"])

rows = files["detect.csv"]
if rows:
    src = f"{data_shown}/detect.csv"
    rows = skip_others(rows, DETECT, src)
    for test in DETECT:
        for unit, urows, part in by_unit([r for r in rows if r.test == test]):
            name = f"detect-{test.split('_')[1]}{part}.svg"
            urows = one_run(name, urows)
            title = f"{WHAT[test]} ({unit}, lower is better)"
            what = upper_first(WHAT[test]) + ","
            per_group(name, urows, title, what, src, ["config", "size"])

rows = files["startup.csv"]
if rows:
    src = f"{data_shown}/startup.csv"
    rows = skip_others(rows, ["startup"], src)
    for unit, urows, part in by_unit(rows):
        name = f"startup{part}.svg"
        urows = one_run(name, urows)
        title = f"start-up time ({unit}, lower is better)"
        vs_ranks(name, urows, title, "Start-up time", src, ["config", "size"])

with open(os.path.join(tmp, "manifest.tsv"), "w", encoding="utf-8") as man:
    for i, (name, desc, script, series) in enumerate(plots):
        for j, points in enumerate(series):
            dat = f"{i:03d}-{j}.dat"
            script = script.replace(f"@@DAT{j}@@", gq(dat))
            with open(os.path.join(tmp, dat), "w", encoding="utf-8") as f:
                f.writelines(" ".join(num(v) for v in p) + "\n" for p in points)
        with open(os.path.join(tmp, f"{i:03d}.gp"), "w", encoding="utf-8") as f:
            f.write(f"{TERMINAL}\nset output '{i:03d}.svg'\n{script}\n")
        man.write(f"{i:03d}\t{name}\n")

with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
    f.write("# Benchmark plots\n\n")
    f.write(f"Generated by `bench/plots.sh` (`make plots`) from the CSV files in `{data_shown}/`;\n")
    f.write("do not edit. Every point is the median of its runs, its bar spans min to max. Each plot\n")
    f.write("draws the rows of one run (one host and commit; by default the latest that has rows for\n")
    f.write("it, `bench/plots.sh --host H --commit C` for another), named in its title and below.\n\n")
    if not plots:
        which = " of the selected run" if sel_host or sel_commit else ""
        f.write(f"No plots yet: none of shm.csv, fabric.csv, detect.csv, startup.csv in `{data_shown}/` has data{which}.\n")
    for name, desc, _, _ in plots:
        f.write(f"- [`{name}`]({name}): {desc}\n")
PY
)

python3 -c "$split_py" "$data" "$data_shown" "$tmp" "$sel_host" "$sel_commit"

mkdir -p "$out"
ids=()
written=()
while IFS=$'\t' read -r id name; do
    (cd "$tmp" && gnuplot "$id.gp") || die "gnuplot failed on $name (its messages above)"
    [[ -s "$tmp/$id.svg" ]] || die "gnuplot wrote no $name"
    ids+=("$id")
    written+=("$name")
done <"$tmp/manifest.tsv"

# Only once every plot rendered: move them into place, then drop the stale ones.
for i in "${!written[@]}"; do
    mv "$tmp/${ids[$i]}.svg" "$out/${written[$i]}"
    echo "$prog: wrote $out_shown/${written[$i]}"
done
for f in "$out"/shm-*.svg "$out"/fabric-*.svg "$out"/detect-*.svg "$out"/startup*.svg; do
    [[ -e "$f" ]] || continue
    name=$(basename "$f")
    keep=0
    for w in "${written[@]}"; do [[ "$w" == "$name" ]] && keep=1 && break; done
    if [[ $keep -eq 0 ]]; then
        rm -f "$f"
        echo "$prog: removed $out_shown/$name (no longer produced by the data)"
    fi
done
mv "$tmp/README.md" "$out/README.md"
echo "$prog: wrote $out_shown/README.md (${#written[@]} plots)"
