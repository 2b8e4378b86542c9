# SPDX-License-Identifier: MIT
"""The type stubs python/barecuda/_driver.pyi name exactly what barecuda._driver has.

CPU only and without mypy: the stub is read with `ast`, so a new C function, type,
method or property without a stub (or a stub left behind by a removed one) fails
the suite.  `python -m mypy.stubtest barecuda._driver` (.ci/run) checks the
signatures and types themselves.
"""

import ast
import pathlib

import pytest

import barecuda
from barecuda import _driver

STUB = pathlib.Path(barecuda.__file__).with_name("_driver.pyi")

# Names the stub defines for its own use (argument kinds, shared bases of the
# Memcpy classes); none of them may exist at run time.
STUB_ONLY_CLASSES = frozenset({
    "_HasGpudata", "_HasCudaArrayInterface", "_MemcpyBase", "_Memcpy3DBase",
})

# Attributes that exceptions get per instance (error.c, nvrtc.c, cumodule.c set
# them when raising), so the classes themselves do not have them.
EXCEPTION_INSTANCE_ATTRS = frozenset({"code", "name", "routine", "log", "source", "options"})


def _is_dunder(name):
    return name.startswith("__") and name.endswith("__")


def _stub_tree():
    assert STUB.is_file(), f"{STUB} is not installed (meson.build's install list)"
    return ast.parse(STUB.read_text(), filename=str(STUB))


def _is_alias_or_typevar(node):
    if isinstance(node, ast.AnnAssign):
        ann = node.annotation
        return isinstance(ann, ast.Name) and ann.id == "TypeAlias"
    if isinstance(node, ast.Assign):
        v = node.value
        return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "TypeVar"
    return False


def _body_names(body):
    """Names a module or class body of the stub defines (through `if` blocks too)."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and not _is_alias_or_typevar(node):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign) and not _is_alias_or_typevar(node):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.If):
            names |= _body_names(node.body) | _body_names(node.orelse)
    return names


def _stub_classes(tree):
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _stub_members(classes, name):
    """Non-dunder names of a stub class, with those of its stub-only bases."""
    node = classes[name]
    names = {n for n in _body_names(node.body) if not _is_dunder(n)}
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in STUB_ONLY_CLASSES:
            names |= _stub_members(classes, base.id)
    return names


def _runtime_names():
    return {n for n in vars(_driver) if not _is_dunder(n)}


def _runtime_classes():
    return sorted(n for n in _runtime_names() if isinstance(getattr(_driver, n), type))


def test_module_names_match():
    tree = _stub_tree()
    stub = {n for n in _body_names(tree.body) if not _is_dunder(n)} - STUB_ONLY_CLASSES
    runtime = _runtime_names()
    assert not runtime - stub, f"in barecuda._driver but not in {STUB.name}: {sorted(runtime - stub)}"
    assert not stub - runtime, f"in {STUB.name} but not in barecuda._driver: {sorted(stub - runtime)}"


def test_stub_only_names_are_absent_at_runtime():
    present = sorted(n for n in STUB_ONLY_CLASSES if hasattr(_driver, n))
    assert not present, f"stub-only names now exist in barecuda._driver: {present}"
    assert STUB_ONLY_CLASSES <= set(_stub_classes(_stub_tree()))


@pytest.mark.parametrize("name", _runtime_classes())
def test_class_members_match(name):
    classes = _stub_classes(_stub_tree())
    assert name in classes, f"class {name} has no stub"
    cls = getattr(_driver, name)
    runtime = {n for n in vars(cls) if not _is_dunder(n)}
    stub = _stub_members(classes, name)
    if issubclass(cls, BaseException):
        stub -= EXCEPTION_INSTANCE_ATTRS
    assert not runtime - stub, f"{name}: not in the stub: {sorted(runtime - stub)}"
    assert not stub - runtime, f"{name}: only in the stub: {sorted(stub - runtime)}"


def _c_methods():
    out = []
    for cname in _runtime_classes():
        for mname, raw in vars(getattr(_driver, cname)).items():
            kind = type(raw).__name__
            if kind in ("method_descriptor", "classmethod_descriptor"):
                out.append((f"{cname}.{mname}", kind, raw))
    return out


@pytest.mark.parametrize("qual,kind,raw", _c_methods(), ids=lambda v: v if isinstance(v, str) and "." in v else "")
def test_c_method_signature_names_its_receiver(qual, kind, raw):
    # "name($self, ...)" / "name($type, ...)": without it inspect.signature and
    # stubtest read the unbound method as taking no self.
    sig = raw.__text_signature__
    assert sig is not None, f"{qual}: no signature line"
    want = "($type" if kind == "classmethod_descriptor" else "($self"
    assert sig.startswith(want), f"{qual}: signature {sig!r} must start with {want!r}"
