# SPDX-License-Identifier: MIT
"""The tutorial notebooks (docs/tutorials/*.ipynb) are sound without a GPU (CPU test).

They are executed on the GPU machine (.ci/gpu, tools/run_notebooks.py).  Here,
without one: every notebook is valid nbformat JSON; every code cell is Python once
its IPython magics are taken out (``ast.parse``); every ``%%cuda`` cell's options
parse and its CUDA C compiles (compile-only, NVRTC needs no GPU); each notebook
loads the extension, asserts against NumPy, and the files its Markdown links to
exist.  Saved outputs, if any, hold no error but in cells tagged raises-exception.
"""

import ast
import re
from pathlib import Path

import pytest
from conftest import missing_api_names

TUTORIALS = Path(__file__).resolve().parents[1] / "docs" / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb")) if TUTORIALS.is_dir() else []

nbformat = pytest.importorskip("nbformat")
pytestmark = pytest.mark.skipif(not NOTEBOOKS, reason=f"no notebooks in {TUTORIALS} "
                                "(the docs folder is absent: installed-only test run)")


def load(path):
    return nbformat.read(path, as_version=4)


def python_of(source):
    """The cell's Python with IPython's syntax taken out: a cell magic makes the
    whole cell not Python (None); line magics and shell escapes become `pass`."""
    if source.lstrip().startswith("%%"):
        return None
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            line = line[:len(line) - len(stripped)] + "pass"
        lines.append(line)
    return "\n".join(lines)


def cuda_cells(nb):
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("%%cuda"):
            first, _, body = cell.source.partition("\n")
            yield cell, first[len("%%cuda"):].strip(), body


def ids(paths):
    return [p.name for p in paths]


def test_there_are_six_tutorials_listed_in_the_index():
    assert len(NOTEBOOKS) >= 6
    index = (TUTORIALS / "index.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert re.search(rf"^{re.escape(path.stem)}$", index, re.M), (
            f"{path.name} is not in docs/tutorials/index.md's toctree")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebook_is_valid(path):
    nb = load(path)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_code_cells_parse(path):
    nb = load(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    for n, cell in enumerate(code):
        text = python_of(cell.source)
        if text is None:
            assert cell.source.startswith("%%cuda"), f"cell {n}: unknown cell magic"
            continue
        try:
            ast.parse(text, filename=f"{path.name} code cell {n}")
        except SyntaxError as exc:
            pytest.fail(f"{path.name}, code cell {n}: {exc}\n{cell.source}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_code_names_real_api(path):
    """Every barecuda name the notebook imports or reaches through a module exists:
    checked here, since on the CPU the cells never run."""
    code = "\n".join(t for c in load(path).cells if c.cell_type == "code"
                     for t in [python_of(c.source)] if t is not None)
    assert not missing_api_names(code), f"{path.name}: no such name: {missing_api_names(code)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebook_loads_the_extension_and_checks_results(path):
    nb = load(path)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "%load_ext barecuda" in nb.cells[1].source or "%load_ext barecuda" in code
    assert re.search(r"^\s*assert ", code, re.M), f"{path.name} asserts nothing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_markdown_links_exist(path):
    nb = load(path)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", cell.source):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            assert (path.parent / target.split("#")[0]).exists(), (
                f"{path.name} links to {target}, which does not exist")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_saved_outputs_hold_no_unexpected_error(path):
    for cell in load(path).cells:
        if cell.cell_type != "code" or "raises-exception" in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            assert output.output_type != "error", (
                f"{path.name}: a saved output is an error: {output.get('ename')}: "
                f"{output.get('evalue')}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_cuda_cells_compile(path):
    """Each %%cuda cell's options parse and its source compiles (no GPU needed);
    only the cells tagged raises-exception may fail, and they must."""
    jupyter = pytest.importorskip("barecuda.jupyter")
    from barecuda import driver as drv
    try:
        drv.nvrtc_version()
    except drv.Error as exc:
        pytest.skip(f"no NVRTC: {exc}")
    for cell, line, body in cuda_cells(load(path)):
        args = jupyter.parse_magic_line(line)
        assert not args.compile_only, "tutorial cells bind their kernels"
        ns = {}
        if "raises-exception" in cell.metadata.get("tags", []):
            with pytest.raises(drv.CompileError):
                jupyter.run_cell(line + " --compile-only", body, ns)
            continue
        report = jupyter.run_cell(line + " --compile-only", body, ns)
        assert report is not None and report.kind in ("cubin", "ptx")
        assert "kernels: (none)" not in report.notes, f"{path.name}: {line!r} has no kernel"
