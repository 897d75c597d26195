"""The Streamlit drill-down app (``lagscope ui``): why is this group behind, since when, and
what happened to its members?

Modules: :mod:`.params` (the URL contract), :mod:`.data` (DuckDB queries over the lake),
:mod:`.store` (their cached versions), :mod:`.processing` (pure DataFrame work),
:mod:`.charts` (plotly), :mod:`.widgets`, :mod:`.views` (one module of layout per page) and
``main.py``, the script Streamlit runs. docs/ui.md describes the app and its URL contract.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_LAKE", "ENV_LAKE", "ENV_RESULTS", "ENV_STORAGE", "MAIN_SCRIPT"]

#: the script ``streamlit run`` executes
MAIN_SCRIPT = Path(__file__).with_name("main.py")

#: environment variables that tell the app where to read (set by ``lagscope ui``)
ENV_LAKE = "LAGSCOPE_UI_LAKE"
ENV_RESULTS = "LAGSCOPE_UI_RESULTS"
#: the settings' ``storage`` section (JSON: endpoint, region, path-style, which credential source;
#: never a secret) for an ``s3://`` lake or results root
ENV_STORAGE = "LAGSCOPE_UI_STORAGE"
#: the sample lake root when neither ``--lake`` nor ``LAGSCOPE_UI_LAKE`` says otherwise
DEFAULT_LAKE = Path(".lagscope") / "lake"
