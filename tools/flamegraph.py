#!/usr/bin/env python3
"""Flame graph of `perf script` output, as one self-contained SVG.

Debian packages no flame-graph renderer, so this is the small part atomdb's
profiling scripts need: fold each sampled stack (root first), then draw one
box per frame, as wide as its share of the samples, the root at the bottom.

Usage: perf script -i perf.data | tools/flamegraph.py --title T > out.svg
       tools/flamegraph.py --top 25 < perf-script.txt   (self-time table)
"""

import argparse
import html
import re
import sys
import zlib

FRAME_RE = re.compile(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def frame_name(sym, dso):
    """A frame's label: the symbol without its offset, else the library;
    kernel frames end in " [k]" so the table can tell the two halves apart."""
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
    if dso.startswith("[kernel"):
        return sym + " [k]"
    if sym and sym != "[unknown]":
        return sym
    return "[" + dso.rsplit("/", 1)[-1] + "]"


def read_stacks(lines):
    """Yields one root-first list of frame names per sample."""
    frames = []
    comm = None
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                yield [comm] + frames[::-1]
            frames, comm = [], None
            continue
        if comm is None:
            comm = line.split()[0]
            continue
        m = FRAME_RE.match(line)
        if m:
            frames.append(frame_name(m.group(1), m.group(2)))
    if comm is not None:
        yield [comm] + frames[::-1]


class Node:
    __slots__ = ("name", "count", "children")

    def __init__(self, name):
        self.name, self.count, self.children = name, 0, {}


def build_tree(stacks):
    root = Node("all")
    for stack in stacks:
        root.count += 1
        node = root
        for name in stack:
            node = node.children.setdefault(name, Node(name))
            node.count += 1
    return root


def colour(name):
    h = zlib.crc32(name.encode())
    if name.endswith(" [k]"):
        return "rgb(%d,%d,%d)" % (200 + h % 40, 110 + h % 60, 60)
    return "rgb(%d,%d,%d)" % (220 + h % 35, 80 + (h >> 8) % 120, 40 + (h >> 16) % 40)


def render(root, title, width=1200, row=16):
    depth = [0]

    def measure(node, d):
        depth[0] = max(depth[0], d)
        for child in node.children.values():
            measure(child, d + 1)

    measure(root, 0)
    height = (depth[0] + 1) * row + 50
    out = ['<?xml version="1.0" standalone="no"?>',
           '<svg version="1.1" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg" '
           'font-family="Verdana,sans-serif" font-size="11">' % (width, height),
           '<rect x="0" y="0" width="%d" height="%d" fill="#f8f8f0"/>' % (width, height),
           '<text x="%d" y="20" text-anchor="middle" font-size="15">%s</text>'
           % (width // 2, html.escape(title))]
    scale = (width - 20) / max(root.count, 1)

    def draw(node, x, d):
        w = node.count * scale
        if w < 0.3:
            return
        y = height - 10 - (d + 1) * row
        pct = 100.0 * node.count / max(root.count, 1)
        label = html.escape(node.name)
        out.append('<g><title>%s (%d samples, %.2f%%)</title>'
                   '<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" rx="2"/>'
                   % (label, node.count, pct, x, y, w, row - 1, colour(node.name)))
        chars = int(w / 7)
        if chars >= 3:
            text = node.name if len(node.name) <= chars else node.name[:chars - 2] + ".."
            out.append('<text x="%.1f" y="%d">%s</text>' % (x + 3, y + row - 4, html.escape(text)))
        out.append("</g>")
        cx = x
        for child in sorted(node.children.values(), key=lambda c: c.name):
            draw(child, cx, d + 1)
            cx += child.count * scale

    draw(root, 10, 0)
    out.append("</svg>")
    return "\n".join(out)


def self_table(stacks, top):
    counts, total = {}, 0
    for stack in stacks:
        total += 1
        leaf = stack[-1]
        counts[leaf] = counts.get(leaf, 0) + 1
    rows = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
    kernel = sum(n for name, n in counts.items() if name.endswith(" [k]"))
    return "kernel %.1f%%, user space %.1f%% of %d samples\n" % (
        100.0 * kernel / max(total, 1), 100.0 * (total - kernel) / max(total, 1), total) + "\n".join("%6.2f%%  %s" % (100.0 * n / max(total, 1), name) for name, n in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--title", default="flame graph")
    ap.add_argument("--comm", help="keep only samples of this command name")
    ap.add_argument("--top", type=int, help="print the N frames with most self time instead")
    args = ap.parse_args()
    stacks = [s for s in read_stacks(sys.stdin) if not args.comm or s[0] == args.comm]
    if not stacks:
        sys.exit("flamegraph: no samples on stdin")
    if args.top:
        print(self_table(stacks, args.top))
    else:
        print(render(build_tree(stacks), "%s (%d samples)" % (args.title, len(stacks))))


if __name__ == "__main__":
    main()
