"""Spark in production: spark-submit's primary file and a cluster smoke job.

- ``entry.py``: the primary file ``spark-submit`` runs (the image copies it to
  ``/opt/lagscope/spark-entry.py``); it hands its arguments to the ``lagscope`` command line.
- :mod:`lagscope.deploy.spark.check`: a small Spark job over the sample lake that runs the
  same way on ``local[*]`` and on a cluster, to check that a cluster can run lagscope's jobs.

The spark-submit examples for real clusters (standalone, Kubernetes, YARN) are in
``deploy/spark/README.md``. A standalone master and workers on loopback, for development, are a
dev tool: :mod:`lagscope.devtools.spark_standalone` (``lagscope spark start``/``stop``).
"""
