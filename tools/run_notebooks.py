# SPDX-License-Identifier: MIT
"""Execute the tutorial notebooks top to bottom with nbclient (on a GPU machine).

    python tools/run_notebooks.py [--out DIR] [--inplace] [--timeout S] [NOTEBOOK ...]

Runs each notebook (default: docs/tutorials/*.ipynb, in name order) in a fresh
Python kernel whose working directory is the notebook's folder.  A cell that raises
fails its notebook, unless the cell is tagged ``raises-exception`` (nbclient's
convention: the first notebook shows a compile error on purpose).  Every notebook
checks its results against NumPy with ``assert``, so "ran without error" means
"computed what it says".

--out DIR writes each executed notebook (with its outputs) to DIR; --inplace
writes the outputs back into the notebooks themselves, which is how the outputs
the documentation site shows are made (the site never executes them: docs/conf.py
has nb_execution_mode = "off").  The last line printed is the summary
``notebooks: N/M ran without error (S s)``; the exit status is 0 only when all ran.
``.ci/gpu`` runs this; it needs nbclient, nbformat and ipykernel (and matplotlib,
which the notebooks plot with).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

TUTORIALS = Path(__file__).resolve().parents[1] / "docs" / "tutorials"


def run_one(path: Path, timeout: int, kernel: str):
    """Execute the notebook at `path`; (executed notebook, error text or None)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel,
                            resources={"metadata": {"path": str(path.parent)}},
                            record_timing=True)
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError) as exc:
        return nb, str(exc).strip()
    except Exception as exc:    # noqa: BLE001 - a kernel that died, a missing kernelspec
        return nb, f"{type(exc).__name__}: {exc}"
    return nb, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to run (default: docs/tutorials/*.ipynb)")
    parser.add_argument("--out", type=Path, help="write the executed notebooks here")
    parser.add_argument("--inplace", action="store_true",
                        help="write the outputs back into the notebooks")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (600)")
    parser.add_argument("--kernel", default="python3", help="kernel name (python3)")
    args = parser.parse_args(argv)
    try:
        import nbformat
    except ImportError as exc:
        print(f"notebooks: not run ({exc}; pip install nbclient nbformat ipykernel)")
        return 2
    paths = args.notebooks or sorted(TUTORIALS.glob("*.ipynb"))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    failed = []
    for path in paths:
        start = time.perf_counter()
        nb, error = run_one(path, args.timeout, args.kernel)
        took = time.perf_counter() - start
        if args.out:
            nbformat.write(nb, args.out / path.name)
        if args.inplace and error is None:
            nbformat.write(nb, path)
        if error is None:
            print(f"ok      {path.name} ({took:.1f} s)", flush=True)
        else:
            failed.append(path.name)
            print(f"FAILED  {path.name} ({took:.1f} s)\n{error}\n", flush=True)
    total = time.perf_counter() - t0
    print(f"notebooks: {len(paths) - len(failed)}/{len(paths)} ran without error "
          f"({total:.0f} s)" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
