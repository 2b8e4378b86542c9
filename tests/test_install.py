# SPDX-License-Identifier: MIT
"""The driver-only install, on the CPU: barecuda's wheel in a fresh virtual
environment with only NVIDIA's pip wheels, the CUDA toolkit hidden.

The wheel under test is, by default, the barecuda these tests import, packed
back into a wheel from its installed files (its RECORD): `pip install .[test]`
has just built it, and a second build costs CI minutes for nothing the loader
sees.  BARECUDA_TEST_INSTALL=1 builds one instead (tools/build_wheel.sh with the
nvidia-cuda-runtime wheel's cuda.h), and $BARECUDA_TEST_WHEEL names one built
already.  For each NVRTC wheel the
README names, a venv gets the wheel with its extra, and inside a mount namespace
in which an empty directory is bind-mounted over every /usr/local/cuda* (and
CUDA_HOME, CUDA_PATH, LD_LIBRARY_PATH are unset) the self-test kernel
(`python -m barecuda`), a kernel including <curand_kernel.h> and one including
<cuda/std/complex> must compile.

NVIDIA's wheels are kept in ~/.cache/barecuda-ci/wheels ($BARECUDA_CI_CACHE):
pip downloads only what is missing there, and with no network the cache alone
is used.  Where no mount namespace can be made, or neither PyPI nor the cache
has the wheels, the tests skip and say why.

The manylinux2014 set (one wheel per CPython 3.10 to 3.13, built with zig cc for
glibc 2.17) is `test_manylinux_set`, marked `slow`: it runs only with
BARECUDA_TEST_MANYLINUX=1 (see .ci/run).
"""

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(os.environ.get("BARECUDA_CI_CACHE")
                     or os.path.join(os.path.expanduser("~"), ".cache", "barecuda-ci"),
                     "wheels")

# name -> (extra, extra requirements): the installs the README's matrix names
VARIANTS = {
    "nvrtc-13.0": ("cu13", ["nvidia-cuda-nvrtc==13.0.*"]),
    "nvrtc-13-newest": ("cu13", []),
    "nvrtc-cu12": ("cu12", []),
}

#: variants whose point is the newest release: PyPI is asked even when the cache has one
NEWEST = {"nvrtc-13-newest"}

CURAND_KERNEL = r"""
#include <curand_kernel.h>
extern "C" __global__ void draw(float *out, unsigned long long seed)
{
    curandStatePhilox4_32_10_t s;
    curand_init(seed, threadIdx.x, 0, &s);
    out[threadIdx.x] = curand_uniform(&s);
}
"""

COMPLEX_KERNEL = r"""
#include <cuda/std/complex>
extern "C" __global__ void rotate(cuda::std::complex<float> *z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] *= cuda::std::complex<float>(0.0f, 1.0f);
}
"""

# Run inside the namespace by the venv's python: compiles both kernels and says
# what was loaded from where.
CHECK = textwrap.dedent("""
    import json, sys
    from barecuda import driver as drv, compiler
    arch = "sm_%d" % compiler._supported_archs()[-1]
    out = {"nvrtc_version": list(drv.nvrtc_version())}
    for name, src in (("curand", sys.argv[1]), ("complex", sys.argv[2])):
        try:
            img = compiler.compile(open(src).read(), arch=arch, no_extern_c=True,
                                   cache_dir=False)
            out[name] = "ok: %d bytes for %s" % (len(img), arch)
        except drv.Error as exc:
            out[name] = "FAILED: %s" % exc
    out["loader_info"] = {k: v for k, v in drv.loader_info().items()}
    print("CHECK " + json.dumps(out))
""")


def _hidden_dirs():
    """The toolkit directories to hide (real paths, each once)."""
    seen = []
    for p in sorted(glob.glob("/usr/local/cuda*")) + [os.environ.get("CUDA_HOME") or "",
                                                      os.environ.get("CUDA_PATH") or ""]:
        if p and os.path.isdir(p):
            real = os.path.realpath(p)
            if real not in seen and real != "/":
                seen.append(real)
    return seen


def _unshare_prefix():
    return ["unshare", "-m", "--propagation", "private"] if os.geteuid() == 0 else \
        ["unshare", "-r", "-m", "--propagation", "private"]


def hidden_run(argv, empty, cwd, env, timeout=600):
    """Run argv in a new mount namespace with `empty` bind-mounted over the toolkit."""
    mounts = " && ".join(f'mount --bind "$E" "{d}"' for d in _hidden_dirs()) or "true"
    script = f'{mounts} && exec "$@"'
    return subprocess.run(_unshare_prefix() + ["sh", "-c", script, "sh", *argv],
                          cwd=cwd, env=dict(env, E=empty), capture_output=True, text=True,
                          timeout=timeout)


def _namespace_problem():
    """None when a mount namespace with a bind mount can be made here, else why not."""
    if sys.platform != "linux":
        return "needs Linux mount namespaces"
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is not installed"
    try:
        p = subprocess.run(_unshare_prefix() + ["sh", "-c", 'mount --bind / /mnt && echo ok'],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare could not run: {exc}"
    if p.returncode != 0 or "ok" not in p.stdout:
        return ("cannot make a mount namespace with a bind mount here (unshare -m: "
                f"{(p.stderr or p.stdout).strip()[-300:]})")
    return None


def _network():
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


def _clean_env(tmp):
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH",
                        "BARECUDA_NVRTC", "BARECUDA_LIBCURAND", "BARECUDA_LIBCUDA",
                        "VIRTUAL_ENV", "PYTHONHOME")}
    env["BARECUDA_CACHE_DIR"] = os.path.join(tmp, "kcache")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _outer_pip():
    """Whether this interpreter's pip can install into another environment
    (`pip --python`, pip 22.3 and newer): then a venv needs no pip of its own, and
    ensurepip (a minute on the CI machine) is skipped."""
    import importlib.metadata as md
    try:
        major, minor = (int(x) for x in md.version("pip").split(".")[:2])
    except (md.PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (22, 3)


def _pip(python):
    """pip for `python`'s environment."""
    return [sys.executable, "-m", "pip", "--python", python] if _outer_pip() else \
        [python, "-m", "pip"]


def pip_install(python, reqs, env, timeout=900, refresh=False):
    """pip install `reqs` into `python`'s environment from the wheel cache.  What
    the cache lacks is downloaded when PyPI is reachable (`pip download` only
    fetches what is missing); `refresh` asks PyPI first in any case, for what must
    be the newest release.  Without a network, the cache alone is used."""
    os.makedirs(CACHE, exist_ok=True)
    pip = _pip(python)

    def install():
        # --no-compile: no .pyc for numpy and the rest (the checks import little)
        return subprocess.run([*pip, "install", "-q", "--no-compile", "--no-index",
                               "--find-links", CACHE, *reqs], env=env, capture_output=True,
                              text=True, timeout=timeout)
    online = _network() if refresh else None    # None: not asked yet
    p = None if online else install()
    if p is None or p.returncode != 0:
        if online is None:
            online = _network()
        if not online:      # so install() ran, and failed
            pytest.skip(f"no network to PyPI, and the wheel cache {CACHE} lacks some of "
                        f"{reqs}: {p.stderr.strip()[-300:]}")
        d = subprocess.run([*pip, "download", "-q", "-d", CACHE, *reqs], env=env,
                           capture_output=True, text=True, timeout=timeout)
        for f in glob.glob(os.path.join(CACHE, "barecuda-*")):
            os.remove(f)    # the wheel under test is never taken from the cache
        assert d.returncode == 0, d.stdout + d.stderr
        p = install()
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def build_wheel(python, outdir, extra_env=None, args=("-Csetup-args=-Dcuda-headers=wheel",)):
    """tools/build_wheel.sh with `python` first on PATH; the path of the wheel."""
    env = dict(os.environ, BARECUDA_DIST=outdir, **(extra_env or {}))
    env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
    env.pop("VIRTUAL_ENV", None)
    p = subprocess.run(["bash", os.path.join(ROOT, "tools", "build_wheel.sh"), *args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-5000:]
    path = p.stdout.strip().splitlines()[-1]
    assert path.endswith(".whl") and os.path.isfile(path), p.stdout[-3000:]
    return path, p.stdout


def repack_installed(outdir):
    """The installed barecuda (the one imported here) as a wheel in `outdir`: the
    files its RECORD lists, with a fresh RECORD (pip's own additions, byte code and
    INSTALLER/REQUESTED/direct_url.json, left out).  Skips when barecuda is not an
    installed distribution (a meson build dir on PYTHONPATH, say)."""
    import base64
    import hashlib
    import importlib.metadata as md
    import zipfile
    try:
        dist = md.distribution("barecuda")
    except md.PackageNotFoundError:
        pytest.skip("barecuda is not installed as a distribution (pip install .): "
                    "nothing to pack into a wheel; set BARECUDA_TEST_INSTALL=1 to build one")
    import barecuda
    site = str(dist.locate_file(""))
    if not os.path.realpath(barecuda.__file__).startswith(os.path.realpath(site)):
        pytest.skip(f"the barecuda imported ({barecuda.__file__}) is not the installed "
                    f"distribution in {site}")
    info = next(f for f in dist.files if f.name == "WHEEL" and
                f.parent.name.endswith(".dist-info"))
    distinfo = str(info.parent)
    tags = [ln.split(":", 1)[1].strip() for ln in dist.read_text("WHEEL").splitlines()
            if ln.startswith("Tag:")]
    assert tags, dist.read_text("WHEEL")
    name = f"barecuda-{dist.version}-{tags[0]}.whl"
    skip = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}
    records = []
    path = os.path.join(outdir, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for f in dist.files:
            rel = str(f)
            if rel.startswith("..") or "__pycache__" in f.parts or (
                    str(f.parent) == distinfo and f.name in skip):
                continue
            data = f.locate().read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            records.append(f"{rel},sha256={digest.decode()},{len(data)}")
            z.writestr(rel, data)
        records.append(f"{distinfo}/RECORD,,")
        z.writestr(f"{distinfo}/RECORD", "\n".join(records) + "\n")
    assert any(r.startswith("barecuda/_driver") for r in records), records
    return path


@pytest.fixture(scope="session")
def ns_ok():
    why = _namespace_problem()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="session")
def built_wheel(ns_ok, tmp_path_factory):
    """barecuda's wheel, built once per session with the nvidia-cuda-runtime wheel's
    cuda.h (or $BARECUDA_TEST_WHEEL)."""
    given = os.environ.get("BARECUDA_TEST_WHEEL")
    if given:
        return given
    if os.environ.get("BARECUDA_TEST_INSTALL") != "1":
        return repack_installed(str(tmp_path_factory.mktemp("repacked")))
    if not os.path.isdir(os.path.join(ROOT, "tools")):
        pytest.skip("not run from a checkout (tools/build_wheel.sh is missing)")
    if not _network() and not os.environ.get("PIP_FIND_LINKS"):
        pytest.skip("no network to PyPI: building the wheel needs its build requirements")
    t0 = time.monotonic()
    path, _ = build_wheel(sys.executable, str(tmp_path_factory.mktemp("dist")))
    print(f"built {path} in {time.monotonic() - t0:.0f} s")
    return path


def run_driver_only(wheel, python_exe, extra, reqs, tmp, refresh=False):
    """Make a venv of `python_exe`, install `wheel[extra]` + reqs, and run the
    self-test and CHECK with the toolkit hidden.  Returns (self-test process,
    CHECK's dict or None, CHECK process)."""
    import json
    env = _clean_env(tmp)
    venv = os.path.join(tmp, "venv")
    subprocess.run([python_exe, "-m", "venv", *(["--without-pip"] if _outer_pip() else []),
                    venv], check=True, env=env, timeout=300)
    py = os.path.join(venv, "bin", "python")
    pip_install(py, [f"{wheel}[{extra}]" if extra else wheel, *reqs], env, refresh=refresh)
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty, exist_ok=True)
    for name, src in (("curand.cu", CURAND_KERNEL), ("complex.cu", COMPLEX_KERNEL),
                      ("check.py", CHECK)):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(src)
    main = hidden_run([py, "-m", "barecuda"], empty, tmp, env)
    chk = hidden_run([py, os.path.join(tmp, "check.py"), os.path.join(tmp, "curand.cu"),
                      os.path.join(tmp, "complex.cu")], empty, tmp, env)
    result = None
    for line in chk.stdout.splitlines():
        if line.startswith("CHECK "):
            result = json.loads(line[6:])
    return main, result, chk


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_driver_only_install(variant, built_wheel, tmp_path):
    extra, reqs = VARIANTS[variant]
    t0 = time.monotonic()
    main, result, chk = run_driver_only(built_wheel, sys.executable, extra, reqs,
                                        str(tmp_path), refresh=variant in NEWEST)
    said = (f"--- python -m barecuda (exit {main.returncode}):\n{main.stdout}{main.stderr}"
            f"--- check (exit {chk.returncode}):\n{chk.stdout}{chk.stderr}")
    print(said)
    print(f"{variant}: {time.monotonic() - t0:.0f} s")
    venv = str(tmp_path / "venv")
    # no GPU here: status 2 means the self-test kernel compiled (1: it did not)
    assert main.returncode in (0, 2), said
    assert "compiled the self-test kernel for sm_" in main.stdout, said
    assert result is not None, said
    info = result["loader_info"]
    assert info["libnvrtc"].startswith(venv), said      # the wheel's, not a toolkit's
    if variant == "nvrtc-13.0":
        assert result["nvrtc_version"][:2] == [13, 0], said
    elif variant == "nvrtc-cu12":
        assert result["nvrtc_version"][0] == 12, said
    assert result["curand"].startswith("ok"), said
    assert result["complex"].startswith("ok"), said


def test_hidden_toolkit_script_hides_the_toolkit(tmp_path):
    """tools/hidden_toolkit.sh (the same hiding, for a whole suite or .ci/gpu): inside,
    every toolkit folder is empty, no nvcc/ptxas/nvlink is found on PATH (wrapper scripts
    included), CUDA_HOME is unset, and the command's exit status comes back; outside,
    nothing changed and nothing is left in /tmp."""
    problem = _namespace_problem()
    if problem:
        pytest.skip(problem)
    hidden = _hidden_dirs()
    if not hidden:
        pytest.skip("no CUDA toolkit here (/usr/local/cuda*, CUDA_HOME) to hide")
    if not any(os.listdir(d) for d in hidden):
        pytest.skip("the toolkit's folders are empty here already: this run is under "
                    "tools/hidden_toolkit.sh itself")
    before = set(glob.glob("/tmp/barecuda-no-toolkit.*"))
    probe = ("import os, shutil, sys, json; print(json.dumps({"
             "'listed': {d: os.listdir(d) for d in sys.argv[1:]}, "
             "'tools': {t: shutil.which(t) for t in ('nvcc', 'ptxas', 'nvlink')}, "
             "'cuda_home': os.environ.get('CUDA_HOME')})); sys.exit(7)")
    script = os.path.join(ROOT, "tools", "hidden_toolkit.sh")
    p = subprocess.run([script, sys.executable, "-c", probe, *hidden], cwd=tmp_path,
                       env=dict(os.environ, CUDA_HOME=hidden[0]), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 7, p.stderr
    seen = json.loads(p.stdout)
    assert seen["listed"] == {d: [] for d in hidden}, seen
    assert seen["tools"] == {"nvcc": None, "ptxas": None, "nvlink": None}, seen
    assert seen["cuda_home"] is None
    assert any(os.listdir(d) for d in hidden)            # outside: as before
    assert set(glob.glob("/tmp/barecuda-no-toolkit.*")) == before
    bad = subprocess.run([script], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "usage:" in bad.stderr


SUBSET = ["test_loader.py", "test_main.py", "test_nvrtc_headers.py", "test_build.py"]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("BARECUDA_TEST_MANYLINUX") != "1",
                    reason="the manylinux2014 set (4 wheels, ~10 minutes on 2 cores) runs with "
                           "BARECUDA_TEST_MANYLINUX=1")
def test_manylinux_set(tmp_path):
    """tools/build_wheel.sh --all: one manylinux2014 wheel per CPython 3.10-3.13,
    each confirmed by `auditwheel show`, installed into a venv of its own
    interpreter and passing the CPU tests' import and compile subset there."""
    import re
    if not _network() and not os.environ.get("PIP_FIND_LINKS"):
        pytest.skip("no network to PyPI: building the wheels needs their build requirements")
    t0 = time.monotonic()
    _, out = build_wheel(sys.executable, str(tmp_path / "dist"),
                         args=("--all", "-Csetup-args=-Dcuda-headers=wheel"))
    print(f"built the set in {time.monotonic() - t0:.0f} s")
    wheels = sorted(glob.glob(str(tmp_path / "dist" / "*.whl")))
    tags = sorted(re.findall(r"-(cp3\d+)-", " ".join(os.path.basename(w) for w in wheels)))
    assert tags == ["cp310", "cp311", "cp312", "cp313"], wheels
    pythons = {}
    for v in ("3.10", "3.11", "3.12", "3.13"):
        cands = sorted(glob.glob(os.path.join(os.environ.get("PYENV_ROOT") or
                                              os.path.expanduser("~/.pyenv"),
                                              "versions", v + ".*", "bin", "python")))
        pythons["cp3" + v[2:]] = cands[-1] if cands else shutil.which("python" + v)
    auditwheel = [sys.executable, "-m", "auditwheel"]
    for whl in wheels:
        t1 = time.monotonic()
        show = subprocess.run(auditwheel + ["show", whl], capture_output=True, text=True)
        print(show.stdout)
        assert show.returncode == 0, show.stdout + show.stderr
        assert re.search(r'platform tag:\s*"(manylinux2014|manylinux_2_17)_x86_64"',
                         show.stdout), show.stdout
        assert "manylinux2014_x86_64" in os.path.basename(whl)
        tag = re.search(r"-(cp3\d+)-", os.path.basename(whl)).group(1)
        d = tmp_path / tag
        d.mkdir()
        env = _clean_env(str(d))
        for k in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH"):
            if k in os.environ:
                env[k] = os.environ[k]      # the toolkit stays visible here
        venv = str(d / "venv")
        subprocess.run([pythons[tag], "-m", "venv", venv], check=True, env=env, timeout=300)
        py = os.path.join(venv, "bin", "python")
        pip_install(py, [whl, "pytest>=7", "hypothesis>=6"], env)
        tests = [os.path.join(ROOT, "tests", t) for t in SUBSET]
        r = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                           cwd=str(d), env=env, capture_output=True, text=True, timeout=900)
        print(f"{tag}: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ''} "
              f"({time.monotonic() - t1:.0f} s)")
        assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
