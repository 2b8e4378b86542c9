# SPDX-License-Identifier: MIT
"""The picture of the Python floors (docs/architecture.md, "Floors you can see") says
what the checked contract says ([tool.importlinter] in pyproject.toml, run by
lint-imports in .ci/run): the same floors in the same order, each with the same public
faces, the same private subpackage, and that subpackage's modules as they are on disk.
No GPU, no build: it reads the three as files."""

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib needs CPython 3.11")

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "architecture.md"
CONFIG = ROOT / "pyproject.toml"
PACKAGE = ROOT / "python" / "barecuda"

pytestmark = pytest.mark.skipif(
    not (PICTURE.is_file() and CONFIG.is_file() and PACKAGE.is_dir()),
    reason="needs the source tree (docs/, pyproject.toml, python/barecuda/)")


def picture_floors(path):
    """[(floor, faces, machinery package or None, machinery modules)] from the picture
    in `path`, top floor first, the C base left out."""
    text = path.read_text(encoding="utf-8")
    block = re.search(r"```[a-z]*\n(floor +public faces.*?)```", text, re.S)
    assert block, f"no picture of the floors in {path}"
    lines = block.group(1).splitlines()
    header = lines[0]
    faces_at, machinery_at = header.index("public faces"), header.index("machinery")
    floors = []
    for line in lines[2:]:
        name = line[:faces_at].strip(" |")
        if name.startswith("base"):
            break
        if name:
            floors.append([name, [], None, []])
        faces = line[faces_at:machinery_at].split()
        floors[-1][1] += [f.rstrip("/") for f in faces]
        words = line[machinery_at:].split()
        if words and words[0].startswith("("):
            continue                    # "(each its own module or package)"
        if words and words[0].endswith("/"):
            floors[-1][2] = words.pop(0).rstrip("/")
        for w in words:                 # "elementwise(_getters)": two modules
            m = re.fullmatch(r"(\w+)\((\w+)\)", w)
            floors[-1][3] += [m.group(1), m.group(1) + m.group(2)] if m else [w]
    return floors


def contract_layers():
    config = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "floors")["layers"]
    return [[m.strip().removeprefix("barecuda.") for m in layer.split(":")] for layer in layers]


def check_picture(path):
    floors = picture_floors(path)
    layers = contract_layers()
    # the contract: a floor's faces, then its machinery (one subpackage), except the top
    expected = [layers[0]] + [layers[i] + layers[i + 1] for i in range(1, len(layers), 2)]
    assert len(floors) == len(expected), (floors, expected)
    for (name, faces, machinery, modules), checked in zip(floors, expected):
        private = [m for m in checked if m.startswith("_") and not m.startswith("__")]
        public = [m for m in checked if m not in private]
        assert sorted(faces) == sorted(public), \
            f"floor {name!r}: the picture shows {sorted(faces)}, the contract {sorted(public)}"
        assert [machinery] == (private or [None]), \
            f"floor {name!r}: the picture's machinery {machinery}, the contract's {private}"
        if machinery:
            on_disk = sorted(p.stem for p in (PACKAGE / machinery).glob("*.py")
                             if p.stem != "__init__")
            assert sorted(modules) == on_disk, \
                f"floor {name!r}: the picture lists {sorted(modules)}, {machinery}/ holds {on_disk}"


def test_the_picture_shows_the_checked_floors():
    check_picture(PICTURE)


def test_a_picture_missing_a_face_or_a_module_fails(tmp_path):
    """The check fails when the picture leaves out a face or a module that exists."""
    text = PICTURE.read_text(encoding="utf-8")
    for old, new, floor in ((" cumath ", "        ", "arrays"),
                            (" cubin", "      ", "compilation")):
        assert old in text
        planted = tmp_path / "architecture.md"
        planted.write_text(text.replace(old, new, 1), encoding="utf-8")
        with pytest.raises(AssertionError, match=f"floor '{floor}'"):
            check_picture(planted)
