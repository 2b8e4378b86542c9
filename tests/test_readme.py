# SPDX-License-Identifier: MIT
"""The README's quick start runs as written."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def quick_start():
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no python block"
    return blocks[0]


def test_readme_starts_with_the_two_commands():
    lines = [l.strip() for l in README.read_text(encoding="utf-8").splitlines() if l.strip()]
    assert lines[1] == "pip install . && python -m barecuda"
    assert lines[2] == 'pip install ".[test]" && pytest'


def test_quick_start_compiles():
    compile(quick_start(), "README.md", "exec")


@pytest.mark.gpu
def test_quick_start_runs():
    exec(compile(quick_start(), "README.md", "exec"), {})
