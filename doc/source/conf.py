"""Sphinx configuration of the zaqar-delay documentation.

Built by tests/test_docs.py with ``sphinx-build -W`` from the docs venv
(doc-requirements.txt). The configuration reference is generated from our
options (``oslo_config.sphinxext``), which imports zaqar_delay and Zaqar:
set ZD_DOCS_SITE_PACKAGES to the site-packages of the venv the package
runs in; it is appended to sys.path, after the docs venv's own packages.
"""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
sys.path.insert(0, ROOT)
for extra in filter(None, os.environ.get('ZD_DOCS_SITE_PACKAGES',
                                         '').split(os.pathsep)):
    sys.path.append(extra)

project = 'zaqar-delay'
copyright = 'zaqar-delay developers'
extensions = ['oslo_config.sphinxext', 'myst_parser']
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
master_doc = 'index'
html_theme = 'alabaster'
exclude_patterns = ['examples']
# The backend notes link to files of the repository (README.md, sources)
# that are not pages of this site.
suppress_warnings = ['myst.xref_missing']
myst_heading_anchors = 3
