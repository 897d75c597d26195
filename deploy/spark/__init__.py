"""Spark deployment helpers: a standalone cluster on loopback and a cluster smoke job.

- :mod:`lagscope.deploy.spark.standalone`: start a Spark standalone master and workers with
  pyspark's own ``bin/spark-class`` on 127.0.0.1, wait until the workers register, stop them
  by PID.
- :mod:`lagscope.deploy.spark.check`: a small Spark job over the sample lake that runs the
  same way on ``local[*]`` and on a cluster, to check that a cluster can run lagscope's jobs.

The spark-submit examples for real clusters (standalone, Kubernetes, YARN) are in
``deploy/spark/README.md``.
"""
