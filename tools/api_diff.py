#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A differential check of PyCUDA's API against barecuda's (issue 43).

Imports each PyCUDA module from a real PyCUDA (``pycuda.driver``, ``pycuda.gpuarray``,
...) and barecuda's counterpart (``barecuda.driver``, ...), and for every name PyCUDA
defines there (private ones too; not dunder module attributes, not modules, not names
PyCUDA imported from elsewhere) compares

* presence;
* for classes: which attributes an instance can assign (a plain data attribute, a slot
  or a property with a setter, against a read-only property or descriptor), whether
  instances have a ``__dict__``, membership in ``collections.abc`` (Iterable, Sized,
  Container, Hashable, Sequence), whether the class can be subclassed and whether a
  subclass's instances have a ``__dict__``, and each member's presence and parameters;
* for callables: the parameters (names, order, which have defaults; a barecuda
  callable that accepts more, e.g. an extra keyword with a default or ``**kwargs``, is
  no difference).  Boost.Python functions of PyCUDA's ``_driver`` are read from their
  docstrings' signature lines.

Nothing here makes an instance or touches a GPU: everything is decided from the
classes (their MRO's descriptors, ``__slots__``, ``__dictoffset__``, and for Python
classes the ``self.NAME = ...`` assignments in their methods' source).

Each difference is one line, ``NAME: WHAT`` (sorted); the whole line is its key.
``tools/api_diff_accepted.txt`` lists accepted differences, one a line::

    pycuda.gpuarray.GPUArray.nbytes: assignable in pycuda, read-only in barecuda -- WHY

(``#`` starts a comment line).  The script exits 1 on a difference not listed there, and
warns about listed ones that no longer occur.  Each acceptance is written by hand, with
what barecuda offers instead: there is deliberately no option that writes the list.

Usage (a real PyCUDA importable, barecuda installed)::

    python3 tools/api_diff.py [--json] [--accepted FILE] [--modules driver,gpuarray]
"""

from __future__ import annotations

import argparse
import ast
import collections.abc
import ctypes
import dataclasses
import importlib
import importlib.util
import inspect
import json
import os
import pkgutil
import re
import sys
import textwrap
import types
from typing import Any, Iterable

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ACCEPTED = os.path.join(HERE, "api_diff_accepted.txt")

#: PyCUDA's modules whose names are compared, each with barecuda's counterpart.
COMPARED = ["driver", "compiler", "gpuarray", "elementwise", "reduction", "scan", "cumath",
            "curandom", "tools", "characterize", "sparse.operator", "sparse.coordinate",
            "sparse.packeted", "sparse.cg", "sparse.inner"]
#: PyCUDA's modules whose names are not compared (their presence still is), and why.
NOT_COMPARED = {
    "autoinit": "importing it creates a context (needs a GPU)",
    "autoprimaryctx": "importing it retains the primary context (needs a GPU)",
    "debug": "importing it imports autoinit (needs a GPU)",
    "gl": "needs OpenGL and a GPU to import",
    "gl.autoinit": "needs OpenGL and a GPU to import",
    "_driver": "compared through pycuda.driver, which star-imports its public names",
    "_cluda": "PyCUDA's private CLUDA preamble text",
    "_mymako": "PyCUDA's private import guard for mako",
    "compyte": "PyCUDA's vendored copy of compyte",
    "compyte.array": "PyCUDA's vendored copy of compyte",
    "compyte.dtypes": "PyCUDA's vendored copy of compyte",
    "sparse.pkt_build": "a helper of sparse.packeted (needs its Cython part)",
    "sparse.pkt_build_cython": "a Cython extension of sparse.packeted",
}
ABCS = ["Iterable", "Sized", "Container", "Hashable", "Sequence"]
#: Class attributes that say nothing about the API (what every class has).
META = {"__module__", "__doc__", "__dict__", "__weakref__", "__slots__", "__qualname__",
        "__firstlineno__", "__static_attributes__", "__annotations__", "__orig_bases__",
        "__parameters__", "__instance_size__", "__abstractmethods__", "_abc_impl",
        "__annotate__", "__annotate_func__", "__annotations_cache__", "__safe_for_unpickling__",
        "__getstate_manages_dict__", "__subclasshook__", "__init_subclass__", "__class_getitem__",
        "__match_args__", "__dataclass_fields__", "__dataclass_params__"}


@dataclasses.dataclass(frozen=True, order=True)
class Difference:
    name: str       # e.g. pycuda.gpuarray.GPUArray.nbytes
    what: str       # e.g. assignable in pycuda, read-only in barecuda

    @property
    def key(self) -> str:
        return f"{self.name}: {self.what}"

    def __str__(self) -> str:
        return self.key


# ---------------------------------------------------------------- which names count

def _foreign_imports(module: types.ModuleType, package: str) -> set[str]:
    """Names a module binds by importing them from outside `package` (from its source)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level == 0 and source.split(".")[0] != package:
                out.update(a.asname or a.name for a in node.names if a.name != "*")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != package:
                    out.add(a.asname or a.name.split(".")[0])
    return out


def _defined_elsewhere(obj: Any, package: str) -> bool:
    """A class or function whose __module__ is outside `package`."""
    if not (inspect.isclass(obj) or callable(obj) and hasattr(obj, "__qualname__")):
        return False
    mod = getattr(obj, "__module__", None)
    if not isinstance(mod, str):
        return False
    return mod.split(".")[0] != package


def own_names(module: types.ModuleType, package: str = "pycuda") -> list[str]:
    """The names `module` defines itself: not dunders, not modules, not imports from
    outside `package`."""
    foreign = _foreign_imports(module, package)
    names = []
    for name, obj in vars(module).items():
        if name.startswith("__") and name.endswith("__"):
            continue
        if isinstance(obj, types.ModuleType) or name in foreign:
            continue
        if _defined_elsewhere(obj, package):
            continue
        names.append(name)
    return sorted(names)


# ---------------------------------------------------------------- descriptors (no instances)

_PTR = ctypes.sizeof(ctypes.c_void_p)
_HEAD = ctypes.sizeof(ctypes.c_ssize_t) + _PTR          # ob_refcnt, ob_type
_DESCR = _HEAD + 3 * _PTR                                 # + d_type, d_name, d_qualname


def _def_struct(descr: Any) -> int | None:
    """The address of a member or getset descriptor's PyMemberDef / PyGetSetDef, checked
    by the name it points to (None when the layout is not the one expected)."""
    try:
        addr = ctypes.c_void_p.from_address(id(descr) + _DESCR).value
        if not addr:
            return None
        name = ctypes.c_char_p.from_address(addr).value
        if name is None or name.decode() != descr.__name__:
            return None
        return addr
    except (ValueError, UnicodeDecodeError, OSError):
        return None


def _member_writable(descr: Any) -> bool | None:
    """Whether a member descriptor (a slot, a C struct member) accepts assignment."""
    addr = _def_struct(descr)
    if addr is None:
        return None
    # PyMemberDef: const char *name; int type; Py_ssize_t offset; int flags; ...
    flags = ctypes.c_int.from_address(addr + 2 * _PTR + ctypes.sizeof(ctypes.c_ssize_t)).value
    return not flags & 1            # READONLY


def _getset_writable(descr: Any) -> bool | None:
    """Whether a getset descriptor (a C property) has a setter."""
    addr = _def_struct(descr)
    if addr is None:
        return None
    # PyGetSetDef: const char *name; getter get; setter set; ...
    return bool(ctypes.c_void_p.from_address(addr + 2 * _PTR).value)


def _mro_lookup(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return _MISSING


_MISSING = object()


def _class_def(klass: type) -> ast.ClassDef | None:
    """The ast of a Python class's definition.  inspect.getsource finds it by the
    class's module; a class whose __module__ names the module that re-exports it (a
    public face) is found through its methods' code instead."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        return next((n for n in tree.body if isinstance(n, ast.ClassDef)), None)
    except (OSError, TypeError, SyntaxError, IndentationError):
        pass
    for member in vars(klass).values():
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        elif isinstance(member, property):
            member = member.fget
        code = getattr(member, "__code__", None)
        if code is None:
            continue
        try:
            with open(code.co_filename, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.ClassDef) and node.name == klass.__name__
                    and node.lineno <= code.co_firstlineno <= (node.end_lineno or 0)):
                return node
    return None


def instance_attributes(cls: type) -> set[str]:
    """Names a Python class's methods assign as ``self.NAME = ...`` (from the source of
    every class in its MRO that has one), plus annotated class-level fields."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        cdef = _class_def(klass)
        if cdef is None:
            continue
        for item in cdef.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names.add(item.target.id)
            if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if not item.args.args or "staticmethod" in {getattr(d, "id", "") for d in
                                                         item.decorator_list}:
                continue
            me = item.args.args[0].arg
            for node in ast.walk(item):
                targets: list[ast.AST] = []
                if isinstance(node, ast.Assign):
                    targets = list(node.targets)
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                    targets = [node.target]
                while targets:
                    t = targets.pop()
                    if isinstance(t, (ast.Tuple, ast.List)):
                        targets.extend(t.elts)
                    elif isinstance(t, ast.Starred):
                        targets.append(t.value)
                    elif (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                          and t.value.id == me):
                        names.add(t.attr)
    return names


def has_instance_dict(cls: type) -> bool:
    return bool(getattr(cls, "__dictoffset__", 0))


def attribute_state(cls: type, name: str, inst_attrs: set[str]) -> str:
    """How an instance of `cls` holds `name`: 'assignable', 'read-only', 'method',
    'class attribute', 'missing' or 'unknown'."""
    found = _mro_lookup(cls, name)
    if found is _MISSING:
        if name in inst_attrs:
            return "assignable"
        return "missing"
    if isinstance(found, property):
        return "assignable" if found.fset is not None else "read-only"
    if isinstance(found, types.MemberDescriptorType):
        w = _member_writable(found)
        return "unknown" if w is None else "assignable" if w else "read-only"
    if isinstance(found, types.GetSetDescriptorType):
        w = _getset_writable(found)
        return "unknown" if w is None else "assignable" if w else "read-only"
    if hasattr(type(found), "__set__"):             # another data descriptor
        return "assignable"
    if callable(found) or isinstance(found, (staticmethod, classmethod)):
        return "method"
    if name in inst_attrs:
        return "assignable"
    return "class attribute"


# ---------------------------------------------------------------- signatures

@dataclasses.dataclass(frozen=True)
class Param:
    name: str | None       # None: positional only (a Boost.Python argN)
    kind: str              # 'pos', 'kw' (keyword only), 'var' (*args), 'varkw' (**kwargs)
    default: bool

    def __str__(self) -> str:
        if self.kind == "var":
            return f"*{self.name or 'args'}"
        if self.kind == "varkw":
            return f"**{self.name or 'kwargs'}"
        return f"{self.name or '_'}{'=' if self.default else ''}"


_BP_LINE = re.compile(r"^\s*(\w+)\(\s*(.*)\)\s*->\s*.*:\s*$")


def boost_signatures(func: Any) -> list[list[Param]] | None:
    """The overloads of a Boost.Python function, read from its docstring's signature
    lines (``name( (T)arg1, (T)flags=0 [, (T)x=1]) -> R :``); None if it has none."""
    doc = getattr(func, "__doc__", None) or ""
    sigs = []
    for line in doc.splitlines():
        m = _BP_LINE.match(line)
        if not m:
            continue
        body = m.group(2).replace("[", "").replace("]", "")
        params = []
        for piece in filter(None, (p.strip() for p in body.split(","))):
            piece = re.sub(r"^\([^)]*\)", "", piece).strip()
            pname, _, default = piece.partition("=")
            pname = pname.strip()
            if pname == "*args":
                params.append(Param("args", "var", False))
                continue
            if pname == "**kwargs":
                params.append(Param("kwargs", "varkw", False))
                continue
            params.append(Param(None if re.fullmatch(r"arg\d+", pname) else pname, "pos",
                                bool(default)))
        sigs.append(params)
    return sigs or None


def _is_boost(func: Any) -> bool:
    return type(func).__name__ == "function" and type(func).__module__ == "Boost.Python"


def signatures(func: Any, drop_self: bool = False) -> list[list[Param]] | None:
    """The parameter lists `func` accepts (several for overloaded Boost.Python
    functions); None when they cannot be known."""
    if _is_boost(func):
        sigs = boost_signatures(func)
        if sigs is not None and drop_self:
            sigs = [s[1:] for s in sigs]
        return sigs
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    params = []
    for p in sig.parameters.values():
        kind = {p.POSITIONAL_ONLY: "pos", p.POSITIONAL_OR_KEYWORD: "pos",
                p.KEYWORD_ONLY: "kw", p.VAR_POSITIONAL: "var", p.VAR_KEYWORD: "varkw"}[p.kind]
        params.append(Param(None if p.kind == p.POSITIONAL_ONLY else p.name, kind,
                            p.default is not p.empty))
    if drop_self and params and params[0].kind == "pos":
        params = params[1:]
    return [params]


def _accepts(ref: list[Param], cand: list[Param]) -> bool:
    """Whether every call `ref` accepts is accepted by `cand` (same names at the same
    positions, defaults kept, anything extra optional)."""
    c_pos = [p for p in cand if p.kind == "pos"]
    c_kw = {p.name: p for p in cand if p.kind in ("pos", "kw") and p.name}
    c_var = any(p.kind == "var" for p in cand)
    c_varkw = any(p.kind == "varkw" for p in cand)
    used: set[str] = set()
    r_pos = [p for p in ref if p.kind == "pos"]
    for i, p in enumerate(r_pos):
        if i < len(c_pos):
            c = c_pos[i]
            if p.name is not None and c.name != p.name and not c_varkw:
                # a keyword call by pycuda's name must still work
                return False
            if p.name is not None and c.name is None:
                return False
            if p.default and not c.default:
                return False
            if c.name:
                used.add(c.name)
        elif not c_var:
            return False
        elif p.name is not None and p.name not in c_kw and not c_varkw:
            return False
    for p in ref:
        if p.kind == "kw":
            c = c_kw.get(p.name)  # type: ignore[arg-type]
            if c is None:
                if not c_varkw:
                    return False
            elif p.default and not c.default:
                return False
            else:
                used.add(c.name)  # type: ignore[arg-type]
        elif p.kind == "var" and not c_var:
            return False
        elif p.kind == "varkw" and not c_varkw:
            return False
    # whatever else barecuda asks for must be optional
    for c in cand:
        if c.kind in ("pos", "kw") and not c.default and c.name not in used:
            if c.kind == "pos" and c_pos.index(c) < len(r_pos):
                continue
            return False
    return True


def _fmt(sigs: list[list[Param]]) -> str:
    return " | ".join("(" + ", ".join(map(str, s)) + ")" for s in sigs)


def compare_callables(name: str, ref: Any, cand: Any, method: bool = False,
                      cand_method: bool | None = None) -> list[Difference]:
    """A difference when some call `ref` accepts is refused by `cand` (parameters of
    methods compared without the instance's)."""
    rs = signatures(ref, drop_self=method)
    cs = signatures(cand, drop_self=method if cand_method is None else cand_method)
    if rs is None or cs is None:
        return []
    bad = [r for r in rs if not any(_accepts(r, c) for c in cs)]
    if not bad:
        return []
    return [Difference(name, f"signature {_fmt(bad)} in pycuda, {_fmt(cs)} in barecuda")]


def _bound(obj: Any) -> bool:
    return inspect.ismethod(obj) or (inspect.isbuiltin(obj) and
                                     not isinstance(getattr(obj, "__self__", None),
                                                    types.ModuleType)
                                     and getattr(obj, "__self__", None) is not None)


# ---------------------------------------------------------------- classes

def class_members(cls: type, package: str) -> set[str]:
    """The attribute names of a class that belong to its API: those in the __dict__ of
    the classes of its MRO that `package` defines (Boost.Python's too), less META."""
    names: set[str] = set()
    for klass in cls.__mro__:
        mod = getattr(klass, "__module__", "") or ""
        if mod.split(".")[0] != package:
            continue
        names.update(vars(klass))
    return names - META


def _subclass(cls: type) -> type | None:
    try:
        return type("X", (cls,), {})
    except Exception:  # noqa: BLE001 -- TypeError mostly; an Enum with members says others
        return None


def _what(obj: Any) -> str:
    if inspect.isclass(obj):
        return "a class"
    if isinstance(obj, types.ModuleType):
        return "a module"
    if callable(obj):
        return "a function"
    return "a value"


def _method_of(cls: type, name: str) -> tuple[Any, bool] | None:
    """(the callable to read parameters from, whether its first parameter is the
    instance) for member `name` of `cls`."""
    raw = _mro_lookup(cls, name)
    if raw is _MISSING:
        return None
    if isinstance(raw, staticmethod):
        return raw.__func__, False
    try:
        obj = getattr(cls, name)
    except AttributeError:
        return None
    if isinstance(raw, classmethod) or _bound(obj):
        return obj, False
    return obj, True


def _effective(state: str, has_dict: bool) -> str:
    """Whether assigning the attribute on an instance works: a method or class attribute
    is shadowed by an instance attribute where instances have a __dict__."""
    if state in ("method", "class attribute"):
        return "assignable" if has_dict else "read-only"
    return state


def _have(b: bool) -> str:
    return "have" if b else "have no"


def compare_classes(qual: str, ref: type, cand: type, package: str = "pycuda"
                    ) -> list[Difference]:
    """What an instance of `ref` (PyCUDA's) can do that one of `cand` cannot.  Where
    barecuda allows more (a __dict__, an assignable attribute, more parameters) there is
    no difference; membership in collections.abc counts both ways, since code branches
    on it."""
    out: list[Difference] = []
    r_dict, c_dict = has_instance_dict(ref), has_instance_dict(cand)
    if r_dict and not c_dict:
        out.append(Difference(qual, "instances have __dict__ in pycuda, have no __dict__ "
                              "in barecuda"))
    for abc in ABCS:
        a = getattr(collections.abc, abc)
        r, c = issubclass(ref, a), issubclass(cand, a)
        if r != c:
            out.append(Difference(qual, f"{'is' if r else 'is not'} {abc} in pycuda, "
                                  f"{'is' if c else 'is not'} {abc} in barecuda"))
    r_sub, c_sub = _subclass(ref), _subclass(cand)
    if r_sub is not None and c_sub is None:
        out.append(Difference(qual, "subclassable in pycuda, final in barecuda"))
    elif r_sub is not None and c_sub is not None:
        if has_instance_dict(r_sub) and not has_instance_dict(c_sub):
            out.append(Difference(qual, "a subclass's instances have __dict__ in pycuda, "
                                  "have no __dict__ in barecuda"))
    r_inst, c_inst = instance_attributes(ref), instance_attributes(cand)
    for m in sorted(class_members(ref, package) | r_inst):
        mq = f"{qual}.{m}"
        rs = attribute_state(ref, m, r_inst)
        cs = attribute_state(cand, m, c_inst)
        if rs == "missing" or m in ("__init__", "__new__"):
            continue
        if cs == "missing":
            if m == "__hash__" and _mro_lookup(cand, m) is None:
                continue        # said by Hashable
            out.append(Difference(mq, "missing in barecuda"))
            continue
        if "unknown" in (rs, cs):
            continue
        # (a method or class attribute of PyCUDA's is shadowed on instances that have a
        # __dict__: the class's __dict__ line says that, not one line a method)
        r_eff, c_eff = _effective(rs, r_dict), _effective(cs, c_dict)
        if rs == "assignable" and c_eff != "assignable":
            out.append(Difference(mq, "assignable in pycuda, read-only in barecuda"))
        r_raw, c_raw = _mro_lookup(ref, m), _mro_lookup(cand, m)
        r_prop = r_raw is not _MISSING and rs in ("assignable", "read-only") \
            and m not in r_inst
        if rs == "method" and c_raw is not _MISSING and cs != "method":
            out.append(Difference(mq, f"a method in pycuda, "
                                  f"{'a data attribute' if cs != 'class attribute' else 'a non-callable class attribute'} in barecuda"))
            continue
        if r_prop and cs == "method":
            out.append(Difference(mq, "a data attribute in pycuda, a method in barecuda"))
            continue
        if rs == "method" and cs == "method":
            r_m, c_m = _method_of(ref, m), _method_of(cand, m)
            if r_m is not None and c_m is not None:
                d = compare_callables(mq, r_m[0], c_m[0], method=r_m[1], cand_method=c_m[1])
                out += d
    # the constructor
    r_init = _mro_lookup(ref, "__init__")
    if r_init is not _MISSING and _owned(ref, "__init__", package):
        c_init = _mro_lookup(cand, "__init__")
        if c_init is _MISSING or c_init is object.__init__:
            out += compare_callables(f"{qual}.__init__", r_init, cand, method=True,
                                     cand_method=False)
        else:
            out += compare_callables(f"{qual}.__init__", r_init, c_init, method=True,
                                     cand_method=True)
    return out


def _owned(cls: type, name: str, package: str) -> bool:
    for klass in cls.__mro__:
        if name in vars(klass):
            return (getattr(klass, "__module__", "") or "").split(".")[0] == package
    return False


# ---------------------------------------------------------------- modules

def compare_modules(ref: types.ModuleType, cand: types.ModuleType | None, qual: str,
                    package: str = "pycuda") -> list[Difference]:
    """Every difference between module `ref` (PyCUDA's) and `cand` (barecuda's)."""
    out: list[Difference] = []
    for name in own_names(ref, package):
        q = f"{qual}.{name}"
        r = getattr(ref, name)
        if cand is None or not hasattr(cand, name):
            out.append(Difference(q, "missing in barecuda"))
            continue
        c = getattr(cand, name)
        rw, cw = _what(r), _what(c)
        if rw != cw and not (rw == "a function" and cw == "a class"):
            out.append(Difference(q, f"{rw} in pycuda, {cw} in barecuda"))
            continue
        if inspect.isclass(r) and inspect.isclass(c):
            if not name.startswith("_"):    # a private class: its presence only
                out += compare_classes(q, r, c, package)
        elif callable(r) and callable(c):
            out += compare_callables(q, r, c)
    return out


def submodules(package: types.ModuleType) -> list[str]:
    """The dotted names (relative to the package) of a package's submodules, found on
    disk (nothing is imported)."""
    out = []

    def walk(path: list[str], prefix: str) -> None:
        for info in pkgutil.iter_modules(path):
            out.append(prefix + info.name)
            if info.ispkg:
                walk([os.path.join(p, info.name) for p in path], prefix + info.name + ".")

    walk(list(package.__path__), "")
    return sorted(out)


def _find(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def run(modules: Iterable[str] | None = None) -> tuple[list[Difference], list[str]]:
    """Compare a real PyCUDA with barecuda.  Returns (differences, notes)."""
    import pycuda  # noqa: F401 -- the real one
    if hasattr(pycuda, "__barecuda__"):
        raise SystemExit("api_diff: `import pycuda` gives barecuda's alias "
                         "(unset BARECUDA_AS_PYCUDA); a real PyCUDA is needed")
    notes: list[str] = []
    diffs: list[Difference] = []
    wanted = list(modules) if modules else COMPARED
    for sub in submodules(pycuda):
        if not _find(f"barecuda.{sub}"):
            diffs.append(Difference(f"pycuda.{sub}", "module missing in barecuda"))
    for sub in wanted:
        try:
            ref = importlib.import_module(f"pycuda.{sub}")
        except Exception as e:  # noqa: BLE001 -- told, not fatal
            notes.append(f"pycuda.{sub} not compared: PyCUDA's does not import here "
                         f"({type(e).__name__}: {e})")
            continue
        try:
            cand = importlib.import_module(f"barecuda.{sub}")
        except ModuleNotFoundError:
            continue            # said above
        diffs += compare_modules(ref, cand, f"pycuda.{sub}")
    for sub, why in sorted(NOT_COMPARED.items()):
        notes.append(f"pycuda.{sub} not compared: {why}")
    return sorted(set(diffs)), notes


# ---------------------------------------------------------------- the accepted list

def read_accepted(path: str) -> dict[str, str]:
    """{key: reason} from an accepted-differences file; raises ValueError on a line
    without `` -- REASON``."""
    out: dict[str, str] = {}
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, why = line.partition(" -- ")
            if not sep or not why.strip() or not key.strip():
                raise ValueError(f"{path}:{n}: expected 'DIFFERENCE -- WHY ACCEPTED', "
                                 f"got {line!r}")
            out[key.strip()] = why.strip()
    return out


def judge(diffs: list[Difference], accepted: dict[str, str]
          ) -> tuple[list[Difference], list[Difference], list[str]]:
    """(unexplained, accepted, stale accepted keys)."""
    keys = {d.key for d in diffs}
    bad = [d for d in diffs if d.key not in accepted]
    ok = [d for d in diffs if d.key in accepted]
    stale = sorted(k for k in accepted if k not in keys)
    return bad, ok, stale


def main(argv: list[str] | None = None, runner: Any = run) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--accepted", default=DEFAULT_ACCEPTED,
                    help="the accepted differences (default: %(default)s)")
    ap.add_argument("--modules", default="",
                    help="comma-separated PyCUDA modules to compare (default: all)")
    args = ap.parse_args(argv)
    try:
        accepted = read_accepted(args.accepted)
    except ValueError as e:
        print(f"api_diff: {e}", file=sys.stderr)
        return 2
    diffs, notes = runner([m for m in args.modules.split(",") if m] or None)
    bad, ok, stale = judge(diffs, accepted)
    summary = (f"api_diff: {len(diffs)} differences, {len(ok)} accepted, "
               f"{len(bad)} unexplained, {len(stale)} accepted entries no longer occur")
    if args.json:
        print(json.dumps({"differences": [{"name": d.name, "what": d.what, "key": d.key,
                                           "accepted": accepted.get(d.key)} for d in diffs],
                          "unexplained": [d.key for d in bad], "stale": stale,
                          "notes": notes, "summary": summary}, indent=1))
    else:
        for n in notes:
            print(f"# {n}")
        for d in diffs:
            print(d.key if d.key in accepted else f"{d.key}  [unexplained]")
        for k in stale:
            print(f"warning: accepted but no longer occurs: {k}", file=sys.stderr)
        print(summary)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
