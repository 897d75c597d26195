"""spark-submit's primary file for lagscope: ``spark-submit … entry.py analyze --lake … --master …``.

spark-submit needs a Python file to run; this one hands its arguments to the ``lagscope``
command line, so any lagscope command (``analyze``, ``spark check``) runs under spark-submit
with the cluster settings spark-submit was given. The image copies it to
``/opt/lagscope/spark-entry.py``.
"""

from __future__ import annotations

from lagscope.__main__ import main

if __name__ == "__main__":
    main()
