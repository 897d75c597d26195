"""The script Streamlit runs (``lagscope ui``): the sidebar, then the page the URL names."""

from __future__ import annotations

import streamlit as st

from lagscope.app import store, widgets
from lagscope.app.views import VIEWS

st.set_page_config(page_title="lagscope", page_icon="📉", layout="wide")
_selection = widgets.read_selection()
_context = widgets.sidebar(store.current_lake(), _selection)
VIEWS[_selection.page](_context)
