# SPDX-License-Identifier: MIT
"""Fork: CUDA in a child forked after initialisation fails with a clear message;
the spawn start method works."""

import multiprocessing
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

FORK_CHILD = r"""
import os, sys
import barecuda.driver as d
a = d.mem_alloc(1024)          # the parent initialises CUDA
pid = os.fork()
if pid == 0:
    try:
        d.mem_alloc(1024)
        os._exit(3)            # must not work
    except d.Error as e:
        msg = str(e)
        ok = "forked" in msg and "spawn" in msg
        sys.stdout.write(("FORK-OK " if ok else "FORK-BAD ") + type(e).__name__ + ": " + msg + "\n")
        sys.stdout.flush()
        os._exit(0 if ok else 4)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_cuda_in_a_forked_child_says_why():
    r = subprocess.run([sys.executable, "-c", FORK_CHILD], capture_output=True, text=True,
                       timeout=120, cwd="/", env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FORK-OK" in r.stdout


def _spawned(q):
    import numpy as np

    import barecuda.driver as d
    a = np.arange(256, dtype=np.float32)
    dev = d.mem_alloc(a.nbytes)
    d.memcpy_htod(dev, a)
    out = np.empty_like(a)
    d.memcpy_dtoh(out, dev)
    q.put(float(out.sum()))


def test_spawn_start_method_works(ctx):
    mp = multiprocessing.get_context("spawn")
    q = mp.Queue()
    p = mp.Process(target=_spawned, args=(q,))
    p.start()
    got = q.get(timeout=120)
    p.join(60)
    assert p.exitcode == 0 and got == float(sum(range(256)))
