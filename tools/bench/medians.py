#!/usr/bin/env python3
"""Medians of several atomdb-bench --json runs, and issue 17's targets on them.

Usage: tools/bench/medians.py run1.json run2.json ... [--markdown]
Each cell (engine, durability, scenario, strategy, clients, client) gets the
median of its ops/s, p99 and server/client CPU per operation over the runs it
appears in; a cell that broke an invariant in any run stays marked. Then the
targets: counter (atomic) and flash_sale_1 (conditional) against Redis and
PostgreSQL, server CPU per op against Redis, 64 clients against 16, and
every correct strategy at 16 clients against the same one on PostgreSQL.
"""

import json
import statistics
import sys

DUR = {"atomdb": "write", "redis": "everysec", "postgres": "sync_off"}


def load(paths):
    cells = {}
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                key = (row["engine"], row["durability"], row["scenario"], row["strategy"],
                       row["clients"], row.get("client", ""))
                cells.setdefault(key, []).append(row)
    return cells


def med(rows, field):
    vals = [r[field] for r in rows if r.get(field) is not None]
    return statistics.median(vals) if vals else None


def summary(cells):
    out = {}
    for key, rows in cells.items():
        if any(r.get("ops_per_sec") is None for r in rows):
            continue
        out[key] = {
            "ops": med(rows, "ops_per_sec"), "p99": med(rows, "p99_us"),
            "srv": med(rows, "server_cpu_us"), "cli": med(rows, "client_cpu_us"),
            "broken": any(r.get("violations", 0) for r in rows), "runs": len(rows),
        }
    return out


def find(s, engine, scen, strat, clients):
    for key, v in s.items():
        if key[0] == engine and key[1] == DUR[engine] and key[2:5] == (scen, strat, clients):
            return v
    return None


def verdict(ok):
    return "met" if ok else "NOT MET"


def targets(s):
    lines = []
    for scen, strat in (("counter", "atomic"), ("flash_sale_1", "conditional")):
        a16, a64 = find(s, "atomdb", scen, strat, 16), find(s, "atomdb", scen, strat, 64)
        r16 = find(s, "redis", scen, strat, 16)
        p16, p64 = find(s, "postgres", scen, strat, 16), find(s, "postgres", scen, strat, 64)
        if a16 and r16:
            x = a16["ops"] / r16["ops"]
            lines.append("| %s %s, 16 clients, ops/s vs Redis | %.0f / %.0f = %.2fx | >= 0.8x | %s |"
                         % (scen, strat, a16["ops"], r16["ops"], x, verdict(x >= 0.8)))
            if a16["srv"] and r16["srv"]:
                y = a16["srv"] / r16["srv"]
                lines.append("| %s %s, 16 clients, server CPU/op vs Redis | %.1f / %.1f us = %.2fx | <= 1.3x | %s |"
                             % (scen, strat, a16["srv"], r16["srv"], y, verdict(y <= 1.3)))
        if a16 and p16:
            x = a16["ops"] / p16["ops"]
            lines.append("| %s %s, 16 clients, ops/s vs PostgreSQL | %.0f / %.0f = %.2fx | >= 2x | %s |"
                         % (scen, strat, a16["ops"], p16["ops"], x, verdict(x >= 2.0)))
        if a64 and p64:
            x = a64["ops"] / p64["ops"]
            lines.append("| %s %s, 64 clients, ops/s vs PostgreSQL | %.0f / %.0f = %.2fx | >= 5x | %s |"
                         % (scen, strat, a64["ops"], p64["ops"], x, verdict(x >= 5.0)))
        if a16 and a64:
            x = a64["ops"] / a16["ops"]
            lines.append("| %s %s, 64 clients keep of 16 | %.0f / %.0f = %.0f%% | >= 90%% | %s |"
                         % (scen, strat, a64["ops"], a16["ops"], 100 * x, verdict(x >= 0.9)))
    return lines


def matrix(s):
    lines = []
    for key, a in sorted(s.items()):
        engine, dur, scen, strat, clients, _ = key
        if engine != "atomdb" or dur != "write" or clients != 16 or a["broken"]:
            continue
        p = find(s, "postgres", scen, strat, 16)
        if not p or p["broken"]:
            continue
        x = a["ops"] / p["ops"]
        lines.append("| %s | %s | %.0f | %.0f | %.2fx | %s |"
                     % (scen, strat, a["ops"], p["ops"], x, verdict(x >= 1.0)))
    return lines


def main():
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not paths:
        sys.exit(__doc__)
    s = summary(load(paths))
    print("Medians of %d runs.\n" % len(paths))
    print("| cell | engine | ops/s | p99 us | server us/op | client us/op |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for key, v in sorted(s.items(), key=lambda kv: (kv[0][2], kv[0][3], kv[0][4], kv[0][0])):
        engine, dur, scen, strat, clients, client = key
        print("| %s %s x%d%s | %s %s %s | %.0f | %s | %s | %s |"
              % (scen, strat, clients, " BROKEN" if v["broken"] else "", engine, dur, client,
                 v["ops"], "%.0f" % v["p99"] if v["p99"] is not None else "-",
                 "%.1f" % v["srv"] if v["srv"] is not None else "-",
                 "%.1f" % v["cli"] if v["cli"] is not None else "-"))
    t = targets(s)
    if t:
        print("\n| target | measured | wanted | |\n| --- | --- | --- | --- |")
        print("\n".join(t))
    m = matrix(s)
    if m:
        print("\n| scenario | strategy (correct) | atomdb ops/s | PostgreSQL ops/s | ratio | >= PostgreSQL |")
        print("| --- | --- | ---: | ---: | ---: | --- |")
        print("\n".join(m))


if __name__ == "__main__":
    main()
