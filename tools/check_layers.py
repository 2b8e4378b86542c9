# SPDX-License-Identifier: MIT
"""Check that the C units of barecuda._driver call one way: down the floors.

    python tools/check_layers.py BUILD_DIR            # meson build dir (or .o files, or a
                                                      # folder of them); exit 1 on a fault
    python tools/check_layers.py BUILD_DIR --show     # also print the floors and the calls
    python tools/check_layers.py BUILD_DIR --table src/layers.txt --src src

Reads the symbols of each unit's object file with `nm` (a meson build keeps them
as `_driver.<tag>.so.p/src_<unit>.c.o`; a plain `<unit>.o` or `<unit>.c.o` works
too): a unit defines the global symbols nm lists as T, D, B, R (and C, G, S, V, W),
and calls (or reads) those it lists as U.  A U that another unit defines is an
edge from the first unit to the second, whatever header the call came through (an
inline function of a header counts for the unit that inlined it).

Faults, each named with its units and symbols:
  - a unit whose floor is below the floor of a unit it calls (an upward call);
  - a call cycle between units (a strongly connected set of two or more), on one
    floor or across floors;
  - a unit with an object that the layer table does not list, and, against the
    source folder (--src; by default the src/ beside the default table), a
    src/*.c the table does not list or a table entry with no src/*.c.

The layer table (src/layers.txt by default) lists the floors lowest first, one a
line, `floor: unit unit ...`; `#` starts a comment.  Units on one floor may call
each other one way; a lower floor never calls a higher one (DESIGN.md, 1-2).
Pure Python, no imports outside the standard library.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_TABLE = os.path.join(ROOT, "src", "layers.txt")

DEFINED = set("TDBRCGSVW")  # global (upper-case) kinds that define a symbol
UNDEFINED = "U"


class LayerError(Exception):
    """A table or input that cannot be checked (not a layering fault)."""


def read_table(path: str) -> tuple[list[tuple[str, list[str]]], dict[str, int]]:
    """The floors, lowest first, as (name, units), and unit -> floor index."""
    floors: list[tuple[str, list[str]]] = []
    floor_of: dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, rest = line.partition(":")
            if not sep or not name.strip():
                raise LayerError(f"{path}:{lineno}: expected 'floor: unit unit ...', got {raw.strip()!r}")
            units = rest.split()
            for u in units:
                if u in floor_of:
                    raise LayerError(f"{path}:{lineno}: unit {u!r} is listed twice "
                                     f"(on floors {floors[floor_of[u]][0]!r} and {name.strip()!r})")
                floor_of[u] = len(floors)
            floors.append((name.strip(), units))
    if not floors:
        raise LayerError(f"{path}: no floors")
    return floors, floor_of


_OBJ = re.compile(r"^(?:src_)?(?P<unit>[A-Za-z0-9_]+?)(?:\.c)?\.o$")


def unit_of_object(path: str) -> str | None:
    m = _OBJ.match(os.path.basename(path))
    return m.group("unit") if m else None


def find_objects(paths: list[str]) -> dict[str, str]:
    """unit -> object file, from .o files, folders of them, or meson build dirs
    (whose `_driver*.p` target folder is used when there is one)."""
    objects: dict[str, str] = {}

    def add(obj: str) -> None:
        unit = unit_of_object(obj)
        if unit is None:
            return
        if unit in objects and os.path.realpath(objects[unit]) != os.path.realpath(obj):
            raise LayerError(f"two objects for unit {unit!r}: {objects[unit]} and {obj}")
        objects[unit] = obj

    for p in paths:
        if os.path.isfile(p):
            add(p)
            continue
        if not os.path.isdir(p):
            raise LayerError(f"{p}: no such file or folder")
        targets = sorted(d for d in os.listdir(p)
                         if d.startswith("_driver") and d.endswith(".p")
                         and os.path.isdir(os.path.join(p, d)))
        folders = [os.path.join(p, d) for d in targets] or [p]
        for folder in folders:
            for name in sorted(os.listdir(folder)):
                if name.endswith(".o"):
                    add(os.path.join(folder, name))
    if not objects:
        raise LayerError("no object files found in " + ", ".join(paths) +
                         " (build first: ninja -C BUILD_DIR)")
    return objects


def read_symbols(objects: dict[str, str], nm: str) -> dict[str, tuple[set[str], set[str]]]:
    """unit -> (defined global symbols, undefined symbols), from one nm run over
    every object (`nm -P -A`: one `<file>: <name> <kind> ...` line a symbol)."""
    unit_of = {obj: u for u, obj in objects.items()}
    out = subprocess.run([nm, "-P", "-A", *unit_of], check=True, capture_output=True,
                         text=True).stdout
    syms: dict[str, tuple[set[str], set[str]]] = {u: (set(), set()) for u in objects}
    for line in out.splitlines():
        head, sep, rest = line.partition(": ")
        parts = rest.split()
        if not sep or head not in unit_of or len(parts) < 2:
            continue
        defined, undefined = syms[unit_of[head]]
        name, kind = parts[0], parts[1]
        if kind == UNDEFINED:
            undefined.add(name)
        elif kind in DEFINED:
            defined.add(name)
    return syms


def call_graph(objects: dict[str, str], nm: str) -> tuple[dict[str, dict[str, set[str]]], list[str]]:
    """unit -> {called unit -> symbols}, and duplicate-definition complaints."""
    syms = read_symbols(objects, nm)
    owner: dict[str, str] = {}
    problems = []
    for u in sorted(syms):
        for s in syms[u][0]:
            if s in owner and owner[s] != u:
                problems.append(f"symbol {s} is defined by both {owner[s]} and {u}")
            owner.setdefault(s, u)
    graph: dict[str, dict[str, set[str]]] = {u: defaultdict(set) for u in syms}
    for u, (_, undef) in syms.items():
        for s in undef:
            v = owner.get(s)
            if v is not None and v != u:
                graph[u][v].add(s)
    return {u: dict(e) for u, e in graph.items()}, problems


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected sets of two or more units (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # iterative would be longer; the graph is ~30 nodes
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def fmt_syms(syms: set[str], limit: int = 6) -> str:
    s = sorted(syms)
    more = f", ... ({len(s) - limit} more)" if len(s) > limit else ""
    return ", ".join(s[:limit]) + more


def check(objects: dict[str, str], table: str, src: str | None, nm: str,
          show: bool = False, out=sys.stdout) -> list[str]:
    """The faults found (empty when the units call one way)."""
    floors, floor_of = read_table(table)
    graph, faults = call_graph(objects, nm)

    for u in sorted(objects):
        if u not in floor_of:
            faults.append(f"unit {u} ({objects[u]}) is not in the layer table {table}")
    if src is not None:
        have = {f[:-2] for f in os.listdir(src) if f.endswith(".c")}
        for u in sorted(have - set(floor_of)):
            faults.append(f"src/{u}.c is not in the layer table {table}")
        for u in sorted(set(floor_of) - have):
            faults.append(f"the layer table {table} lists {u}, which has no {src}/{u}.c")

    for u in sorted(graph):
        for v in sorted(graph[u]):
            if u in floor_of and v in floor_of and floor_of[u] < floor_of[v]:
                faults.append(f"upward call: {u} (floor {floors[floor_of[u]][0]}) calls "
                              f"{v} (floor {floors[floor_of[v]][0]}): {fmt_syms(graph[u][v])}")
    for comp in cycles(graph):
        inside = set(comp)
        edges = [f"{u} -> {v} ({fmt_syms(graph[u][v], 3)})"
                 for u in comp for v in sorted(graph[u]) if v in inside]
        faults.append(f"call cycle between {', '.join(comp)}: " + "; ".join(edges))

    if show:
        print("floors (lowest first):", file=out)
        for i, (name, units) in enumerate(floors):
            listed = [u if u in objects else u + "(no object)" for u in units]
            print(f"  {i} {name}: {' '.join(listed)}", file=out)
        print("calls (unit -> unit: symbols):", file=out)
        for u in sorted(graph, key=lambda u: (floor_of.get(u, -1), u)):
            for v in sorted(graph[u], key=lambda v: (floor_of.get(v, -1), v)):
                print(f"  {u} -> {v}: {fmt_syms(graph[u][v], 4)}", file=out)
    return faults


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="meson build dir, folders of .o files, or .o files")
    ap.add_argument("--table", default=DEFAULT_TABLE, help="layer table (default: %(default)s)")
    ap.add_argument("--src", default=None,
                    help="source folder whose *.c must all be in the table "
                         "(default: the src/ of the default table; 'none' to skip)")
    ap.add_argument("--nm", default=os.environ.get("NM", "nm"), help="nm to use (default: $NM or nm)")
    ap.add_argument("--show", action="store_true", help="print the floors and the unit calls")
    args = ap.parse_args(argv)

    src = args.src
    if src is None:
        src = os.path.dirname(os.path.abspath(args.table))
    elif src == "none":
        src = None
    if shutil.which(args.nm) is None:
        print(f"check_layers: {args.nm} not found", file=sys.stderr)
        return 2
    try:
        objects = find_objects(args.paths)
        faults = check(objects, args.table, src, args.nm, show=args.show)
    except (LayerError, OSError, subprocess.CalledProcessError) as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    if faults:
        print(f"check_layers: {len(faults)} fault(s) in the C layers "
              f"(table {os.path.relpath(args.table)}):", file=sys.stderr)
        for f in faults:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"check_layers: {len(objects)} units call one way, down the floors of "
          f"{os.path.relpath(args.table)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
