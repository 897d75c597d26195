"""Test helpers shared across test folders (real Prometheus, …)."""

#: Spark settings every test session adds to build_session's. One long-lived local session runs
#: hundreds of small plans: the context cleaner frees the broadcasts and shuffles of finished
#: queries only once the driver's JVM collects them (its periodic GC: every 30 minutes by
#: default), and until then their blocks hold memory a later statement's stage may need (CI:
#: AGGREGATE_OUT_OF_MEMORY on a few hundred rows, late in a full run, that passes alone).
#: The status store keeps the last 1,000 SQL executions (their plans and plan graphs) and jobs
#: and stages even with the UI off: the reference statements' plans are large, and a full run's
#: old generation was seen full (CI and here, 2026-11-29: test_groups' random seeds late in the
#: run, GC-bound, one failing; each passes alone): keep a few.
TEST_SPARK_CONF = {"spark.cleaner.periodicGC.interval": "1min", "spark.sql.ui.retainedExecutions": "20",
                   "spark.ui.retainedJobs": "100", "spark.ui.retainedStages": "100",
                   "spark.ui.retainedTasks": "1000"}
