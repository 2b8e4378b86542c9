# SPDX-License-Identifier: MIT
"""tools/backtrace.c, the crash reporter `BARECUDA_BACKTRACE=1 bash .ci/gpu` preloads
into the test processes: a process that crashes prints the C backtrace of the
faulting thread and the code mappings of barecuda's extension, after Python's own
faulthandler output, and still dies of its signal; one that does not crash is
left alone.  No GPU needed."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "backtrace.c"
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")

pytestmark = [
    pytest.mark.skipif(CC is None or not TOOL.exists(),
                       reason="needs a C compiler and tools/backtrace.c"),
    # AddressSanitizer's runtime handles fatal signals itself (the tool is for plain builds)
    pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                       reason="the sanitizer runtime takes fatal signals itself"),
]


@pytest.fixture(scope="module")
def preload(tmp_path_factory):
    so = tmp_path_factory.mktemp("bt") / "backtrace.so"
    subprocess.run([CC, "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    str(TOOL), "-o", str(so)], check=True, capture_output=True, text=True)
    return so


def run(preload, code):
    # after whatever is preloaded already
    env = dict(os.environ, LD_PRELOAD=":".join(
        p for p in (os.environ.get("LD_PRELOAD"), str(preload)) if p))
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", code],
                          capture_output=True, text=True, env=env, timeout=60)


def test_a_crash_prints_the_c_backtrace_and_still_dies_of_it(preload):
    r = run(preload, "import barecuda._driver, ctypes; ctypes.string_at(0)")
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr[-2000:])
    err = r.stderr
    # Python's stack first (faulthandler), then ours
    assert err.index("Fatal Python error") < err.index("tools/backtrace.c: fatal signal")
    trace = err[err.index("C backtrace"):err.index("=== code mappings")]
    assert "_ctypes" in trace, trace
    maps = err[err.index("=== code mappings"):]
    assert "_driver" in maps and " r-xp " in maps


def test_no_crash_no_output(preload):
    r = run(preload, "import barecuda._driver; print('fine')")
    assert r.returncode == 0 and r.stdout == "fine\n" and r.stderr == ""


def test_other_fatal_signals_are_reported_too(preload):
    r = run(preload, "import os, signal; os.kill(os.getpid(), signal.SIGBUS)")
    assert r.returncode == -signal.SIGBUS
    assert "tools/backtrace.c: fatal signal" in r.stderr
