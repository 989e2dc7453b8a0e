#!/usr/bin/env python3
"""Compares the structure of two lab results.json files: experiment names, table ids, titles,
units, columns, row labels, plot files, titles, axes and series names. Numbers inside titles and
labels are masked (they are measurements or scale). Prints differences; exit 1 if any.
Usage: python3 crates/idspace-lab/tools/results_shape.py BEFORE AFTER [EXPERIMENT...]"""
import json, re, sys

def mask(text):
    return re.sub(r"\d[\d,.]*", "#", text)

def shape(results, only):
    out = []
    for e in results["experiments"]:
        if only and e["name"] not in only:
            continue
        out.append(("experiment", e["name"], mask(e["title"])))
        for t in e["tables"]:
            out.append(("table", e["name"], t["id"], mask(t["title"]), t["unit"], tuple(t["columns"])))
            for r in t["rows"]:
                out.append(("row", e["name"], t["id"], mask(r["label"]), len(r["values"]), len(r["text"])))
        for p in e["plots"]:
            out.append(("plot", e["name"], p["file"], mask(p["title"]), p["x_label"], p["y_label"], p["log_x"], p["log_y"]))
            for s in p["series"]:
                out.append(("series", e["name"], p["file"], s["name"]))
    return out

before = json.load(open(sys.argv[1]))
after = json.load(open(sys.argv[2]))
only = set(sys.argv[3:]) or {e["name"] for e in after["experiments"]}
a, b = shape(before, only), shape(after, only)
import difflib
diff = [l for l in difflib.unified_diff([repr(x) for x in a], [repr(x) for x in b], lineterm="", n=0)]
for l in diff:
    print(l)
print(f"{len(a)} items before, {len(b)} after, {'SAME' if not diff else 'DIFFERENT'} for {sorted(only)}")
sys.exit(1 if diff else 0)
