#!/usr/bin/env python3
"""Two builds from one device call of benchmarks/h200_ab18.sh (reads ab.jsonl only): per timing x
preset x depth x rows, each build's medians over the rounds (min-max), its segment count, and
new / old per round (min-max). Prints a Markdown table.

    python3 benchmarks/ab_compare.py OUT_DIR
"""
import json
import os
import sys
from collections import defaultdict


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    t = defaultdict(lambda: defaultdict(dict))  # key -> build -> round -> time
    segs = defaultdict(dict)
    builds = []
    for line in open(os.path.join(d, "ab.jsonl")):
        if not line.strip():
            continue
        doc = json.loads(line)
        if doc["build"] not in builds:
            builds.append(doc["build"])
        for r in doc["results"]:
            key = (r["timing"], r["preset"], r["depth"], r["query_rows"])
            t[key][doc["build"]][doc["round"]] = r["time_us_median"]
            segs[key][doc["build"]] = f'{r["path"]}/{r["segments"]}'
    old, new = builds[0], builds[-1]
    print(f"| timing | preset | depth | rows | {os.path.basename(old)} µs | {os.path.basename(new)} µs | new / old |")
    print("| --- " * 7 + "|")
    for key in sorted(t, key=lambda k: (k[0] != "stream", k[1], k[2], k[3])):
        o, n = t[key][old], t[key][new]
        ratios = [n[r] / o[r] for r in n if r in o]
        f = lambda v: f"{min(v):.1f}-{max(v):.1f}" if v else "-"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {f(list(o.values()))} ({segs[key].get(old)}) | "
              f"{f(list(n.values()))} ({segs[key].get(new)}) | {min(ratios):.2f}-{max(ratios):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
