# SPDX-License-Identifier: MIT
"""The CUDA C templates (``templates/*.cu``, installed with the package) and how they
are filled in: ``render(name, **hooks)`` substitutes every ``${hook}``;
``headers_for(dtypes)`` is the #include block a kernel of those dtypes needs.
"""

from __future__ import annotations

import os
import string
from typing import TYPE_CHECKING

import numpy as np

from barecuda._core.names import public

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

_TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "templates")
_templates = {}


@public("barecuda.elementwise")
def template(name: str) -> string.Template:
    """The string.Template of templates/<name> (read once)."""
    t = _templates.get(name)
    if t is None:
        with open(os.path.join(_TEMPLATE_DIR, name), encoding="utf-8") as f:
            t = _templates[name] = string.Template(f.read())
    return t


@public("barecuda.elementwise")
def render(template_name: str, **hooks: Any) -> str:
    """Render templates/<name>; every ${hook} of the template must be given."""
    return template(template_name).substitute(**hooks)


@public("barecuda.elementwise")
def headers_for(dtypes: Sequence[np.dtype[Any]]) -> str:
    """The #include lines a kernel handling `dtypes` needs."""
    lines = []
    if any(np.dtype(d) == np.float16 for d in dtypes):
        lines += ["#include <cuda_fp16.h>", "#define BC_HAVE_HALF 1"]
    lines += ["#include <barecuda_complex.cuh>", "#include <barecuda_types.cuh>",
              "using barecuda::bc_cast;"]
    return "\n".join(lines)
