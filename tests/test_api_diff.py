# SPDX-License-Identifier: MIT
"""tools/api_diff.py, PyCUDA's API against barecuda's (CPU): the machinery on small fake
modules, the accepted list, the exit status; and, where a real PyCUDA imports, that
the whole diff has no unexplained difference."""

import collections.abc
import importlib.util
import os
import subprocess
import sys
import textwrap
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "api_diff.py")
_spec = importlib.util.spec_from_file_location("api_diff", TOOL)
api_diff = importlib.util.module_from_spec(_spec)
sys.modules["api_diff"] = api_diff
_spec.loader.exec_module(api_diff)


def fake_module(tmp_path, name, source):
    """A module `name` made from `source` in a file (so the tool can read its source)."""
    path = tmp_path / f"{name.replace('.', '_')}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


PYC = """
    import numbers
    from numbers import Number
    import collections.abc
    CONST = 3
    _private = 1

    class Array:
        def __init__(self, shape, dtype=None):
            self.shape = shape
            self.nbytes = 8
            self.data = None

        @property
        def size(self):
            return 1

        def __iter__(self):
            return iter(())

        def get(self, ary=None, stream=None):
            pass

    def to_gpu(ary, allocator=None):
        pass

    def helper(a, b):
        pass

    def gone():
        pass
"""

BARE = """
    class Array:
        __slots__ = ("shape", "data", "__dict__")

        def __init__(self, shape, dtype=None, order="C"):
            self.shape = shape

        @property
        def nbytes(self):
            return 8

        @property
        def size(self):
            return 1

        def get(self, ary=None, stream=None, **kwargs):
            pass

    def to_gpu(ary, allocator=None, stream=None):
        pass

    def helper(a, c):
        pass

    CONST = 4
    _private = 2
"""


@pytest.fixture
def modules(tmp_path):
    ref = fake_module(tmp_path, "fakepyc.mod", PYC)
    cand = fake_module(tmp_path, "fakebare.mod", BARE)
    yield ref, cand
    for n in ("fakepyc.mod", "fakebare.mod"):
        sys.modules.pop(n, None)


def keys(diffs):
    return sorted(d.key for d in diffs)


def test_own_names_skip_imports_and_dunders(modules):
    ref, _ = modules
    assert api_diff.own_names(ref, "fakepyc") == ["Array", "CONST", "_private", "gone",
                                                  "helper", "to_gpu"]


def test_planted_differences(modules):
    ref, cand = modules
    got = keys(api_diff.compare_modules(ref, cand, "pycuda.mod", package="fakepyc"))
    assert got == [
        "pycuda.mod.Array.__iter__: missing in barecuda",
        "pycuda.mod.Array.nbytes: assignable in pycuda, read-only in barecuda",
        "pycuda.mod.Array: is Iterable in pycuda, is not Iterable in barecuda",
        "pycuda.mod.gone: missing in barecuda",
        "pycuda.mod.helper: signature (a, b) in pycuda, (a, c) in barecuda",
    ]


def test_superset_is_no_difference():
    def ref(a, b=1, *, c=2):
        pass

    def more(a, b=1, d=None, *args, c=2, e=3, **kw):
        pass

    def renamed_with_kwargs(a, x=1, **kw):     # b= still accepted through **kw
        pass

    def fewer(a):
        pass

    def no_default(a, b, *, c=2):
        pass

    assert api_diff.compare_callables("f", ref, more) == []
    assert api_diff.compare_callables("f", ref, renamed_with_kwargs) == []
    assert keys(api_diff.compare_callables("f", ref, fewer)) == [
        "f: signature (a, b=, c=) in pycuda, (a) in barecuda"]
    assert len(api_diff.compare_callables("f", ref, no_default)) == 1
    # a required parameter barecuda makes optional is fine; an extra required one is not
    assert api_diff.compare_callables("f", fewer, ref) == []
    assert len(api_diff.compare_callables("f", fewer, no_default)) == 1


def test_boost_python_docstring_signatures():
    f = types.SimpleNamespace(__doc__=textwrap.dedent("""
        memset_d8( (object)dest, (int)data, (int)size) -> None :

            C++ signature :
                void memset_d8(unsigned long long,unsigned char,unsigned long)

        get( (Device)arg1, (int)arg2 [, (int)flags=0]) -> object :
        """))
    sigs = api_diff.boost_signatures(f)
    assert [[str(p) for p in s] for s in sigs] == [["dest", "data", "size"],
                                                   ["_", "_", "flags="]]


def test_class_properties_without_instances():
    class Ro:
        __slots__ = ("w",)

        @property
        def r(self):
            return 1

        @property
        def rw(self):
            return 1

        @rw.setter
        def rw(self, v):
            pass

    st = api_diff.attribute_state
    assert st(Ro, "r", set()) == "read-only"
    assert st(Ro, "rw", set()) == "assignable"
    assert st(Ro, "w", set()) == "assignable"          # a writable slot
    assert st(int, "real", set()) == "read-only"       # a getset without a setter
    assert st(types.FunctionType, "__globals__", set()) == "read-only"   # READONLY member
    assert st(type, "__name__", set()) == "assignable"
    assert not api_diff.has_instance_dict(Ro)


def test_final_and_abc():
    import enum

    class E(enum.IntEnum):
        A = 1

    class Plain:
        pass

    class Slotted:
        __slots__ = ()

        def __iter__(self):
            return iter(())

    pkg = __name__.split(".")[0]
    assert keys(api_diff.compare_classes("q.E", Plain, E, package=pkg)) == [
        "q.E: subclassable in pycuda, final in barecuda"]
    assert keys(api_diff.compare_classes("q.S", Plain, Slotted, package=pkg)) == [
        "q.S: instances have __dict__ in pycuda, have no __dict__ in barecuda",
        "q.S: is not Iterable in pycuda, is Iterable in barecuda"]
    assert issubclass(Slotted, collections.abc.Iterable)
    # barecuda allowing more (a __dict__) is no difference
    assert api_diff.compare_classes("q.P", Slotted, type("P", (), {"__iter__": None}),
                                    package=pkg) != []      # but Iterable both ways counts


def write(tmp_path, text):
    p = tmp_path / "accepted.txt"
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_accepted_list(tmp_path):
    path = write(tmp_path, """
        # a comment
        pycuda.a.x: missing in barecuda -- barecuda.a.y does it
        pycuda.a.z: missing in barecuda -- gone from CUDA 13
        """)
    acc = api_diff.read_accepted(path)
    assert acc == {"pycuda.a.x: missing in barecuda": "barecuda.a.y does it",
                   "pycuda.a.z: missing in barecuda": "gone from CUDA 13"}
    D = api_diff.Difference
    bad, ok, stale = api_diff.judge([D("pycuda.a.x", "missing in barecuda"),
                                     D("pycuda.a.w", "missing in barecuda")], acc)
    assert [d.key for d in bad] == ["pycuda.a.w: missing in barecuda"]
    assert [d.key for d in ok] == ["pycuda.a.x: missing in barecuda"]
    assert stale == ["pycuda.a.z: missing in barecuda"]
    with pytest.raises(ValueError, match="WHY ACCEPTED"):
        api_diff.read_accepted(write(tmp_path, "pycuda.a.x: missing in barecuda\n"))


def test_exit_status(tmp_path, capsys):
    D = api_diff.Difference
    diffs = [D("pycuda.a.x", "missing in barecuda"), D("pycuda.a.w", "missing in barecuda")]
    runner = lambda modules: (list(diffs), ["pycuda.b not compared: why"])  # noqa: E731
    path = write(tmp_path, "pycuda.a.x: missing in barecuda -- reason\n"
                           "pycuda.a.old: missing in barecuda -- reason\n")
    assert api_diff.main(["--accepted", path], runner=runner) == 1
    out, err = capsys.readouterr()
    assert "pycuda.a.w: missing in barecuda  [unexplained]" in out
    assert "pycuda.a.x: missing in barecuda\n" in out
    assert out.strip().endswith("api_diff: 2 differences, 1 accepted, 1 unexplained, "
                                "1 accepted entries no longer occur")
    assert "no longer occurs: pycuda.a.old" in err
    diffs.pop()
    assert api_diff.main(["--accepted", path, "--json"], runner=runner) == 0
    import json
    data = json.loads(capsys.readouterr().out)
    assert data["unexplained"] == [] and data["differences"][0]["accepted"] == "reason"
    # no option writes the list
    with pytest.raises(SystemExit):
        api_diff.main(["--write-accepted"], runner=runner)


def _real_pycuda():
    """None when a real PyCUDA imports here (without the alias), else why not."""
    env = {k: v for k, v in os.environ.items() if k != "BARECUDA_AS_PYCUDA"}
    r = subprocess.run([sys.executable, "-c", "import pycuda, pycuda.driver; "
                        "assert not hasattr(pycuda, '__barecuda__')"],
                       capture_output=True, text=True, env=env, cwd="/", timeout=120)
    if r.returncode == 0:
        return None
    return (r.stderr.strip().splitlines() or ["?"])[-1]


def test_real_pycuda_no_unexplained_difference():
    why = _real_pycuda()
    if why is not None:
        pytest.skip(f"no real PyCUDA imports here ({why}); .ci/clients runs this diff "
                    "where one is installed")
    env = {k: v for k, v in os.environ.items() if k != "BARECUDA_AS_PYCUDA"}
    r = subprocess.run([sys.executable, "-W", "ignore", TOOL], capture_output=True,
                       text=True, env=env, cwd="/", timeout=600)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
