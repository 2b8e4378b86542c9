# SPDX-License-Identifier: MIT
"""Sphinx extension for barecuda's site (docs/conf.py loads it).

- ``autodoc-process-docstring``: barecuda's docstrings are written to read well in
  ``help()``, not as strict reStructuredText.  They are turned into reST that
  Sphinx takes without warnings: single-backquoted names become inline code (as
  double backquotes already are), the characters reST would take for markup
  outside code (``*``, a trailing ``_``, ``|``) are escaped, and a paragraph
  ending with ``::`` or followed by an indented block keeps that block as code.
  A docstring that opens with its object's call form (for ``help()``) loses it:
  autodoc shows the typed signature above (``drop_call_form``).
- ``autodoc-skip-member``: the enums ``barecuda.driver`` creates on first use are
  left to one table (below), as are private helpers.
- ``.. barecuda-enums::`` (``{barecuda-enums}`` in MyST): a table of the driver's
  enums (name, kind, member count, PyCUDA alias), from the installed build.
- ``autodoc-process-signature``: the C extension's functions and methods (shown as
  ``barecuda.driver``'s) take their typed signatures from the type stub
  ``barecuda/_driver.pyi`` (the docstring's untyped first line is what ``help()``
  shows; the few overloaded ones keep their docstrings' lines, one per form).
- ``.. barecuda-stub-aliases::``: the stub's type aliases those signatures use
  (``_DevicePointer``, ``_HostBuffer`` ...), as a table.
- ``.. barecuda-bench:: PATH``: a benchmark JSON file written by
  ``python -m barecuda.bench --json`` (``.ci/gpu`` writes ``$OUT/bench.json``) as a
  table per section plus the environment it was taken in; without the file, a
  note saying how to make it.
"""

from __future__ import annotations

import ast
import enum
import functools
import inspect
import json
import os
import re

from docutils import nodes
from docutils.parsers.rst import Directive, directives

_CODE_SPAN = re.compile(r"(``.+?``|`[^`\n]+`)")


def _escape_prose(text: str) -> str:
    """Escape reST markup characters in prose (never inside code spans), turn
    `single` backquotes into ``code``."""
    parts, last = [], 0
    for m in _CODE_SPAN.finditer(text):
        parts.append(("prose", text[last:m.start()]))
        span = m.group(0)
        if not span.startswith("``"):
            inner = span[1:-1]
            span = f"``{inner}``" if inner.strip() == inner and inner else span
        parts.append(("code", span))
        last = m.end()
    parts.append(("prose", text[last:]))
    out = []
    for kind, piece in parts:
        if kind == "code":
            out.append(piece)
            continue
        piece = piece.replace("\\", "\\\\")
        piece = piece.replace("*", "\\*").replace("|", "\\|")
        piece = re.sub(r"(\w)_(?=\W|$)", r"\1\\_", piece)     # name_ would be a reference
        piece = re.sub(r"(^|\s)_(\w)", r"\1\\_\2", piece)      # _name would be a target
        piece = piece.replace("[#", "[\\#")
        out.append(piece)
    return "".join(out)


_FIELD = re.compile(r"^\s*:(param|type|returns?|rtype|raises?)\b")
_BULLET = re.compile(r"^(\s*)([-*+]|\d+\.)\s+")


def clean_docstring(lines: list[str]) -> list[str]:
    """barecuda docstring lines -> reST lines that parse without warnings."""
    out: list[str] = []
    in_code = False            # inside an indented literal block
    code_indent = 0
    prev_blank = True
    para_indent = 0
    list_indent: int | None = None
    for raw in lines:
        line = raw.rstrip()
        if not line.strip():
            out.append("")
            prev_blank = True
            continue
        indent = len(line) - len(line.lstrip())
        if in_code:
            if indent >= code_indent:
                out.append(line)
                prev_blank = False
                continue
            in_code = False
        bullet = _BULLET.match(line)
        if bullet:
            list_indent = len(bullet.group(0))
        elif prev_blank:
            list_indent = None
        # An indented block after a blank line (not a list item's continuation)
        # is code, as in help(): keep it verbatim under a '::'.
        continues_item = list_indent is not None and indent == list_indent
        if prev_blank and indent > para_indent and not bullet and not continues_item \
                and out and not out[-1].rstrip().endswith("::"):
            # find the last non-blank line and make it introduce a literal block
            k = len(out) - 1
            while k >= 0 and not out[k].strip():
                k -= 1
            if k >= 0:
                out[k] = out[k].rstrip() + " ::" if not out[k].rstrip().endswith(":") \
                    else out[k].rstrip() + ":"
            else:
                out.insert(0, "::")
                out.insert(1, "")
        if out and out[-1] == "" and len(out) >= 2 and out[-2].rstrip().endswith("::") \
                and indent > para_indent:
            in_code, code_indent = True, indent
            out.append(line)
            prev_blank = False
            continue
        if prev_blank and not bullet:
            para_indent = indent if not continues_item else para_indent
        text = line[indent:]
        if _FIELD.match(line):
            out.append(line)
        else:
            if text.endswith("::") and not text.endswith(":::"):
                body = _escape_prose(text[:-2])
                out.append(" " * indent + body + "::")
            else:
                out.append(" " * indent + _escape_prose(text))
        # A line (not a list item) that starts further in than its paragraph would
        # be a block quote or an error: keep it in the paragraph.
        if not prev_blank and not bullet and indent > para_indent and not continues_item:
            out[-1] = " " * para_indent + out[-1].lstrip()
        prev_blank = False
    return out


def drop_call_form(short: str, obj, lines: list[str]) -> list[str]:
    """A docstring that opens with its object's call form, as help() shows best
    (``GPUArray(shape, dtype, ...)``, wrapped over lines or not, maybe followed by
    ``: what it does``), repeats the typed signature autodoc puts above it: the
    call form goes, and the words after its colon become the first sentence.
    Only where autodoc reads a signature (inspect.signature); the rest keep it."""
    if not lines or not lines[0].startswith(short + "("):
        return lines
    try:
        inspect.signature(obj)
    except (TypeError, ValueError):
        return lines
    depth = 0
    for k, line in enumerate(lines):
        for i, ch in enumerate(line):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth or ch != ")":
                continue
            tail = line[i + 1:].strip()
            rest = lines[k + 1:]
            if not tail:
                return rest[1:] if rest and not rest[0].strip() else rest
            if tail.startswith(":") and tail[1:].strip():
                text = tail[1:].strip()
                return [text[:1].upper() + text[1:]] + rest
            return lines           # "-> ..." or prose after the call: left as written
    return lines


def _process_docstring(app, what, name, obj, options, lines):
    if what in ("class", "function", "method"):
        lines[:] = drop_call_form(name.rsplit(".", 1)[-1], obj, list(lines))
    cleaned = clean_docstring(list(lines))
    lines[:] = cleaned


def _driver_enum_names():
    from barecuda import driver
    names = set(getattr(driver, "enum_names", lambda: ())())
    names |= set(getattr(driver, "_ALIASES", {}))
    return names


def _skip_member(app, what, name, obj, skip, options):
    if name.startswith("_") and name not in app.config.barecuda_public_dunders:
        return True
    if what == "module" and inspect.isclass(obj) and issubclass(obj, enum.Enum) \
            and getattr(obj, "__module__", "") == "barecuda.driver" \
            and name in _driver_enum_names():
        return True        # the generated enums: one table (barecuda-enums)
    return None


@functools.lru_cache(maxsize=None)
def _stub():
    """The parsed type stub of barecuda._driver: (signatures, aliases).  signatures:
    qualified name ("mem_alloc", "Stream.synchronize", "Stream.__init__") -> list of
    (parameters, return annotation) strings, one per overload, without self/cls;
    aliases: name -> its definition, for the ``X: TypeAlias = ...`` lines and the
    Protocol classes they name."""
    import barecuda
    path = os.path.join(os.path.dirname(barecuda.__file__), "_driver.pyi")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    sigs: dict[str, list[tuple[str, str | None]]] = {}
    aliases: dict[str, str] = {}

    def visit(body, prefix, in_class):
        for node in body:
            if isinstance(node, ast.ClassDef):
                if not prefix and any(ast.unparse(b) == "Protocol" for b in node.bases):
                    members = []
                    for n in node.body:
                        if isinstance(n, ast.AnnAssign) or (
                                isinstance(n, ast.FunctionDef)
                                and "property" in {ast.unparse(d) for d in n.decorator_list}):
                            members.append("." + (n.name if isinstance(n, ast.FunctionDef)
                                                  else ast.unparse(n.target)))
                        elif isinstance(n, ast.FunctionDef):
                            members.append(f".{n.name}()")
                    aliases[node.name] = "any object with " + ", ".join(members)
                visit(node.body, f"{prefix}{node.name}.", True)
            elif isinstance(node, ast.FunctionDef):
                decorators = {ast.unparse(d) for d in node.decorator_list}
                args = node.args
                if in_class and "staticmethod" not in decorators:
                    args = ast.arguments(**{k: getattr(args, k) for k in args._fields})
                    if args.posonlyargs:
                        args.posonlyargs = args.posonlyargs[1:]
                    else:
                        args.args = args.args[1:]
                ret = ast.unparse(node.returns) if node.returns is not None else None
                sigs.setdefault(prefix + node.name, []).append((f"({ast.unparse(args)})", ret))
            elif (isinstance(node, ast.AnnAssign) and not prefix and node.value is not None
                  and isinstance(node.target, ast.Name)
                  and ast.unparse(node.annotation) == "TypeAlias"):
                aliases[node.target.id] = ast.unparse(node.value)

    visit(tree.body, "", False)
    return sigs, aliases


def _process_signature(app, what, name, obj, options, signature, return_annotation):
    """The stub's typed signature for the C extension's functions, methods and types
    (None for everything else, and for the few overloaded ones: their docstrings'
    first lines list each form, and Sphinx shows those)."""
    from barecuda import _driver
    prefix = "barecuda.driver."
    if not name.startswith(prefix) or what not in ("function", "class", "method"):
        return None
    qual = name[len(prefix):]
    owner = qual.split(".")[0]
    if what == "method":     # a C method of a C type (not a Python subclass's)
        ok = getattr(_driver, owner, None) is not None and \
            (inspect.ismethoddescriptor(obj) or isinstance(obj, type(len)))
    else:                    # a C function or a C type, as the extension exports it
        ok = getattr(_driver, qual, None) is obj
        qual += ".__init__" if what == "class" else ""
    overloads = _stub()[0].get(qual) if ok else None
    if not overloads or len(overloads) > 1:
        return None
    params, ret = overloads[0]
    return params, (None if what == "class" else ret)


class StubAliases(Directive):
    """The type aliases of barecuda/_driver.pyi that the driver's signatures use."""
    has_content = False

    def run(self):
        _, aliases = _stub()
        intro = nodes.paragraph(text=(
            "The signatures of the C extension's functions and methods come from its type "
            "stub, barecuda/_driver.pyi, and use these aliases:"))
        rows = [(name, value) for name, value in aliases.items() if not name.startswith("_T")]
        return [intro, _table(("alias", "stands for"), rows, [1, 3])]


class EnumTable(Directive):
    """The table of barecuda.driver's generated enums."""
    has_content = False

    def run(self):
        from barecuda import driver
        aliases = getattr(driver, "_ALIASES", {})
        alias_of: dict[str, list[str]] = {}
        for pycuda_name, header_name in aliases.items():
            alias_of.setdefault(header_name, []).append(pycuda_name)
        rows = []
        for name in driver.enum_names():
            if name in aliases:
                continue
            others = sorted(alias_of.get(name, ()))
            cls = getattr(driver, name)
            shown = name
            if not (inspect.isclass(cls) and issubclass(cls, enum.Enum)):
                if not others:
                    continue
                cls = getattr(driver, others[0])
                shown = f"{name} (as {others[0]})"
            kind = "IntFlag" if issubclass(cls, enum.IntFlag) else "IntEnum"
            rows.append((shown, kind, str(len(cls.__members__)), ", ".join(others)))
        major, minor, _ = driver.get_version()
        intro = nodes.paragraph(text=(
            f"Generated from the CUDA {major}.{minor} headers this build of barecuda was "
            f"compiled with; each enum is a class of barecuda.driver created on first use, "
            f"and driver.enum_names() lists them."))
        return [intro, _table(("enum", "kind", "members", "PyCUDA alias"), rows)]


def _table(head, rows, widths=None):
    table = nodes.table()
    group = nodes.tgroup(cols=len(head))
    table += group
    for w in widths or [1] * len(head):
        group += nodes.colspec(colwidth=w)
    thead = nodes.thead()
    group += thead
    hrow = nodes.row()
    for h in head:
        hrow += nodes.entry("", nodes.paragraph(text=h))
    thead += hrow
    tbody = nodes.tbody()
    group += tbody
    for r in rows:
        row = nodes.row()
        for cell in r:
            row += nodes.entry("", nodes.paragraph(text=cell))
        tbody += row
    return table


def _fmt(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class BenchTable(Directive):
    """A benchmark JSON file (python -m barecuda.bench --json) as tables."""
    required_arguments = 1
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        rel, path = env.relfn2path(self.arguments[0])
        env.note_dependency(rel)
        if not os.path.isfile(path):
            return [nodes.note("", nodes.paragraph(text=(
                f"No benchmark results at {self.arguments[0]} yet. The GPU run writes them "
                "(bash .ci/gpu puts bench.json in its output folder; or run "
                "python -m barecuda.bench --json bench.json on a GPU machine); copy the "
                f"file to docs/{self.arguments[0].lstrip('/')} and rebuild.")))]
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        result = []
        environment = data.get("environment", {})
        if environment:
            items = ", ".join(f"{k}: {v}" for k, v in environment.items())
            result.append(nodes.paragraph(text=f"Measured on {items}."))
        sections: dict[str, list] = {}
        for r in data.get("rows", []):
            sections.setdefault(r.get("section") or "other", []).append(r)
        for section, rows in sections.items():
            title = nodes.rubric(text=f"section {section}")
            body = [(r.get("name", ""), f"{_fmt(r.get('value'))} {r.get('unit') or ''}".strip(),
                     _fmt(r.get("ratio")), r.get("vs") or "", r.get("note") or "")
                    for r in rows]
            result += [title, _table(("figure", "value", "ratio", "vs", "note"), body,
                                     [4, 2, 1, 2, 4])]
        for e in data.get("errors", []):
            result.append(nodes.warning("", nodes.paragraph(
                text=f"section {e.get('section')}: {e.get('error')}")))
        return result


def _drop_sourceless_modules(app):
    """sphinx.ext.viewcode notes the modules it found no source for (barecuda._driver,
    the C extension) and still lists them in _modules/index.html, linking pages it
    never writes.  Runs before viewcode's own html-collect-pages (priority 400 < 500)
    and removes those entries; it adds no page."""
    modules = getattr(app.env, "_viewcode_modules", {})
    for name in [k for k, v in modules.items() if v is False]:
        del modules[name]
    return []


def setup(app):
    app.add_config_value("barecuda_public_dunders", frozenset(), "env")
    import barecuda
    app.config.barecuda_public_dunders = frozenset(getattr(barecuda, "PUBLIC_DUNDERS", ()))
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("autodoc-process-signature", _process_signature)
    app.connect("html-collect-pages", _drop_sourceless_modules, priority=400)
    directives.register_directive("barecuda-enums", EnumTable)
    directives.register_directive("barecuda-bench", BenchTable)
    directives.register_directive("barecuda-stub-aliases", StubAliases)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
