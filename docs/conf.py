# SPDX-License-Identifier: MIT
"""Sphinx configuration of barecuda's documentation site.

Build it from a checkout with barecuda installed (the API reference is read from
the installed package's docstrings; no GPU is needed)::

    pip install ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html

The tutorials (docs/tutorials/*.ipynb) are shown with the outputs stored in them:
they are executed on a GPU machine by ``.ci/gpu`` (tools/run_notebooks.py), never
here.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_ext"))

import barecuda  # noqa: E402  (the installed package: autodoc reads its docstrings)

project = "barecuda"
author = "the barecuda authors"
copyright = "barecuda authors, MIT licence"
version = release = barecuda.__version__

extensions = [
    "myst_nb",                 # Markdown (MyST) pages and the notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "barecuda_docs",           # docs/_ext: docstring clean-up, the driver's enum table
]

# -- sources -------------------------------------------------------------------
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3

# The notebooks are executed on the GPU machine (.ci/gpu), and their outputs kept in
# the .ipynb files; the site shows those outputs and never runs a kernel itself.
nb_execution_mode = "off"
nb_merge_streams = True

# -- API reference -------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_inherit_docstrings = False
add_module_names = False
# The C types' signatures come from their docstrings' first line.
autodoc_docstring_signature = True

# -- HTML ----------------------------------------------------------------------
html_theme = "furo"
html_title = f"barecuda {release}"
html_static_path = ["_static"]
html_css_files = ["barecuda.css"]
html_theme_options = {"navigation_with_keys": True}
html_last_updated_fmt = None
html_show_sourcelink = False

# -- link check: internal links only --------------------------------------------
# `sphinx-build -b linkcheck` then checks every cross-reference and local file link
# and contacts no server (the CI machine has no network to rely on).
linkcheck_ignore = [r"https?://.*", r"mailto:.*"]
linkcheck_anchors = False
