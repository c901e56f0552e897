#!/usr/bin/env python3
"""Ladder against its peers from one device call of benchmarks/h200_peers.sh (reads the JSON only).

For each timing (stream, graph) x preset x depth x rows: ladder's median per round (and its share
of the copy ceiling), each peer arm's median per round, the best peer, and ladder / best peer, as
the range over the rounds (min-max). Prints a Markdown table.

    python3 benchmarks/peers_compare.py OUT_DIR      # OUT_DIR holds ladder.jsonl and peers_r*.json
"""
import glob
import json
import os
import sys
from collections import defaultdict


def rng(v, fmt="{:.1f}"):
    if not v:
        return "-"
    lo, hi = min(v), max(v)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else (fmt.format(lo) + "-" + fmt.format(hi))


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    ladder = defaultdict(lambda: defaultdict(list))  # key -> round -> [times]
    share = defaultdict(list)
    path = {}
    for line in open(os.path.join(d, "ladder.jsonl")):
        if not line.strip():
            continue
        doc = json.loads(line)
        for r in doc["results"]:
            key = (r["timing"], r["preset"], r["depth"], r["query_rows"])
            ladder[key][doc["round"]].append(r["time_us_median"])
            share[key].append(100 * r["fraction_of_ceiling"])
            path[key] = f'{r["path"]}/{r["segments"]}'
    peers = defaultdict(lambda: defaultdict(dict))  # key -> round -> arm -> time
    arms = []
    for f in sorted(glob.glob(os.path.join(d, "peers_r*.json"))):
        rnd = int(os.path.basename(f)[len("peers_r"):-len(".json")])
        for r in json.load(open(f)):
            if "time_us_median" not in r:
                continue
            key = (r["timing"], r["preset"], r["depth"], r["query_rows"])
            peers[key][rnd][r["arm"]] = r["time_us_median"]
            if r["arm"] not in arms:
                arms.append(r["arm"])
    print("| timing | preset | depth | rows | ladder µs (path/segs) | % copy | " + " | ".join(arms) +
          " | best peer | ladder / best |")
    print("| --- " * (8 + len(arms)) + "|")
    for key in sorted(ladder, key=lambda k: (k[0] != "stream", k[1], k[2], k[3])):
        lt = [t for rnd in ladder[key].values() for t in rnd]
        cells = []
        for a in arms:
            cells.append(rng([peers[key][rnd][a] for rnd in peers[key] if a in peers[key][rnd]]))
        ratios, best_arms = [], set()
        for rnd, times in ladder[key].items():
            p = peers[key].get(rnd, {})
            if not p:
                continue
            best = min(p, key=p.get)
            best_arms.add(best)
            ratios.extend(t / p[best] for t in times)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {rng(lt)} ({path[key]}) | {rng(share[key], '{:.0f}')} | " +
              " | ".join(cells) + f" | {','.join(sorted(best_arms)) or '-'} | {rng(ratios, '{:.2f}')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
