"""Every public callable of barecuda is documented (CPU test).

A newcomer reads ``help(barecuda.driver.Function)`` or ``help(GPUArray.sum)``
first: each public function, class and method must have a docstring, and the
methods of the C types must carry their signature (the ``name(args)\\n--\\n\\n``
convention) so ``help()`` and ``inspect.signature`` show the arguments.
"""

import importlib
import inspect
import pydoc
import re
from pathlib import Path

import pytest
from conftest import missing_api_names as _missing_names

import barecuda

MODULES = list(barecuda.PUBLIC_MODULES)

# Known gaps outside the Python files this test's author may edit, kept explicit
# so that nothing new slips in.  test_allow_lists_are_current fails as soon as an
# entry is fixed, so the lists only ever shrink.
#
# C methods (src/*.c) whose docstring neither starts with "name(" nor gives
# inspect.signature a __text_signature__ (none at present).
C_SIGNATURE_ALLOW = frozenset()

# Public methods without any docstring (none at present).
DOC_ALLOW = frozenset()

PUBLIC_DUNDERS = barecuda.PUBLIC_DUNDERS


def _is_barecuda(obj):
    mod = getattr(obj, "__module__", None) or ""
    return mod == "barecuda" or mod.startswith("barecuda.")


def _public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return sorted(n for n in names if not n.startswith("_"))


def _module_callables():
    seen = set()
    for modname in MODULES:
        module = importlib.import_module(modname)
        for name in _public_names(module):
            obj = getattr(module, name)
            if inspect.ismodule(obj) or not callable(obj):
                continue
            if not _is_barecuda(obj):
                continue  # numpy, stdlib re-exports
            key = (modname, name)
            if key in seen:
                continue
            seen.add(key)
            yield modname, name, obj


def _barecuda_classes():
    seen = {}
    for modname, name, obj in _module_callables():
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            seen.setdefault(id(obj), (f"{modname}.{name}", obj))
    return list(seen.values())


def _own_methods(cls):
    """(name, raw attribute) for the public methods defined on cls itself."""
    for name, raw in vars(cls).items():
        if name.startswith("_") and name not in PUBLIC_DUNDERS:
            continue
        if isinstance(raw, (staticmethod, classmethod)):
            raw = raw.__func__
        if isinstance(raw, property):
            continue  # properties: documented where useful, not required here
        if inspect.isclass(raw):
            continue
        if not (callable(raw) or inspect.ismethoddescriptor(raw)):
            continue
        if type(raw).__name__ in ("getset_descriptor", "member_descriptor"):
            continue
        yield name, raw


def _c_method(raw):
    return type(raw).__name__ in ("method_descriptor", "builtin_function_or_method",
                                  "classmethod_descriptor", "wrapper_descriptor")


MODULE_CALLABLES = list(_module_callables())
CLASSES = _barecuda_classes()
METHODS = [(f"{qual}.{m}", cls, m, raw) for qual, cls in CLASSES
           for m, raw in _own_methods(cls)]
C_METHODS = [(f"{cls.__name__}.{m}", m, raw) for _, cls, m, raw in METHODS
             if _c_method(raw) and not m.startswith("__")]


def test_collection_is_not_empty():
    assert len(MODULE_CALLABLES) > 50
    names = {qual for qual, _ in CLASSES}
    for cls in ("Device", "Context", "Stream", "Event", "Module", "Function",
                "DeviceAllocation", "Array", "TextureObject"):
        assert f"barecuda.driver.{cls}" in names, cls
    assert "barecuda.gpuarray.GPUArray" in names
    assert len(C_METHODS) > 30


@pytest.mark.parametrize("qual,obj", [(f"{m}.{n}", o) for m, n, o in MODULE_CALLABLES],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_module_callable_has_docstring(qual, obj):
    # a class's own docstring (inspect.getdoc would fall back to a base class's)
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    assert doc and doc.strip(), f"{qual} has no docstring"


@pytest.mark.parametrize("qual,raw", [(q, r) for q, _, _, r in METHODS],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_method_has_docstring(qual, raw):
    if qual in DOC_ALLOW:
        pytest.skip(f"{qual}: no docstring, defined outside the Python files (see DOC_ALLOW)")
    doc = getattr(raw, "__doc__", None)
    assert doc and doc.strip(), f"{qual} has no docstring"


@pytest.mark.parametrize("qual,name,raw", C_METHODS,
                         ids=lambda v: v if isinstance(v, str) else "")
def test_c_method_docstring_starts_with_signature(qual, name, raw):
    if qual in C_SIGNATURE_ALLOW:
        pytest.skip(f"{qual}: C docstring without a signature line (see allow-list)")
    doc = raw.__doc__ or ""
    ok_sig = True
    try:
        inspect.signature(raw)
    except (ValueError, TypeError):
        ok_sig = False
    assert ok_sig or doc.startswith(f"{name}("), (
        f"{qual}: docstring must start with '{name}(args)\\n--\\n\\n', got {doc[:60]!r}")


def test_allow_lists_are_current():
    """Every allow-listed name exists and still fails (drop fixed ones)."""
    methods = {q: raw for q, _, _, raw in METHODS}
    for qual in DOC_ALLOW:
        assert qual in methods, f"{qual} is no longer a public method"
        assert not (methods[qual].__doc__ or "").strip(), (
            f"{qual} now has a docstring: remove it from DOC_ALLOW")
    by_name = {q: raw for q, _, raw in C_METHODS}
    for qual in C_SIGNATURE_ALLOW:
        assert qual in by_name, f"{qual} is no longer a C method"
        raw = by_name[qual]
        try:
            inspect.signature(raw)
            fixed = True
        except (ValueError, TypeError):
            fixed = (raw.__doc__ or "").startswith(qual.rsplit(".", 1)[1] + "(")
        assert not fixed, f"{qual} now has a signature: remove it from C_SIGNATURE_ALLOW"


def test_help_function_reads_well():
    import barecuda.driver as drv

    text = pydoc.render_doc(drv.Function, renderer=pydoc.plaintext)
    assert "class Function" in text
    for meth in ("prepare", "prepared_call", "get_attribute", "set_cache_config"):
        if hasattr(drv.Function, meth):
            assert f"{meth}(" in text, meth
    # no method shows up undocumented in help()
    for name, raw in _own_methods(drv.Function):
        assert raw.__doc__, name


def test_reference_has_a_page_per_public_module():
    """The site's API reference (docs/reference, Sphinx autodoc over the installed
    package) has a page documenting each of barecuda.PUBLIC_MODULES, and lists it."""
    docs = Path(__file__).resolve().parents[1] / "docs"
    ref = docs / "reference"
    if not ref.is_dir():
        pytest.skip(f"no {ref}: the docs folder is absent (installed-only test run)")
    index = (ref / "index.md").read_text(encoding="utf-8")
    for modname in MODULES:
        short = modname.rsplit(".", 1)[1]
        page = ref / f"{short}.md"
        assert page.is_file(), f"{modname} has no reference page {page}"
        assert re.search(rf"^\.\. automodule:: {re.escape(modname)}$",
                         page.read_text(encoding="utf-8"), re.M), (
            f"{page} does not document {modname} with automodule")
        assert f"({short}.md)" in index and re.search(rf"^{short}$", index, re.M), (
            f"docs/reference/index.md does not list {short}")


# ---------------------------------------------------- the code in the prose pages

ROOT = Path(__file__).resolve().parents[1]


def _prose_blocks():
    """(file, first line, code) of every ```python block of the README and the site's
    Markdown pages."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    out = []
    for page in pages:
        if not page.is_file():
            continue
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            out.append((page.relative_to(ROOT), text[:m.start()].count("\n") + 2, m.group(1)))
    return out


BLOCKS = _prose_blocks()


def test_the_prose_pages_have_code():
    if not (ROOT / "docs").is_dir():
        pytest.skip("the docs folder is absent (installed-only test run)")
    assert len(BLOCKS) >= 10, BLOCKS


@pytest.mark.parametrize("where,line,code", BLOCKS,
                         ids=[f"{p}:{n}" for p, n, _ in BLOCKS])
def test_prose_code_parses_and_names_real_api(where, line, code):
    """Each Python example of the README and the site parses, and every barecuda name
    it imports or reaches through a module exists (a renamed function would otherwise
    live on in the documentation)."""
    try:
        compile(code, f"{where}:{line}", "exec")
    except SyntaxError as exc:
        pytest.fail(f"{where}:{line}: {exc}")
    assert not _missing_names(code), f"{where}:{line}: no such name: {_missing_names(code)}"


def test_the_prose_check_sees_a_wrong_name():
    assert _missing_names("import barecuda.driver as drv\nn = drv.mem_allocc(4)\n") == \
        ["barecuda.driver.mem_allocc"]
    assert _missing_names("from barecuda.gpuarray import to_gpu, to_gpuu\n") == \
        ["barecuda.gpuarray.to_gpuu"]
    assert _missing_names("from barecuda import tools\ntools.DeviceMemoryPool().allocate\n"
                          "tools.nvtx_rang\n") == ["barecuda.tools.nvtx_rang"]
    assert _missing_names("import barecuda.autoinit\nimport barecuda.nosuch\n") == \
        ["barecuda.nosuch"]
