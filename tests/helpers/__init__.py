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
#: The third time (CI, 2026-11-29, test_groups' random seed 4 at 4g) it was measured: between
#: statements the session's live heap is 0.4-0.9 GB, but while the reference statements plan
#: (hundreds of operators, analysed again at each step) the old generation reaches 2.7 GB of 4
#: and the JVM runs a full GC every half minute; Spark's memory manager meanwhile counts 60% of
#: the heap as its own and hands it out in 64 MB pages (humongous objects that need contiguous
#: free regions), so a page the heap cannot give fails the aggregate, however few its rows.
#: Spark's share is therefore 30% (the tests' data needs little), its pages 1 MB, and the
#: sessions 6g (TEST_DRIVER_MEMORY; the first session of a run starts the JVM, so its heap is
#: the run's).
TEST_SPARK_CONF = {"spark.cleaner.periodicGC.interval": "1min", "spark.sql.ui.retainedExecutions": "20",
                   "spark.ui.retainedJobs": "100", "spark.ui.retainedStages": "100",
                   "spark.ui.retainedTasks": "1000", "spark.memory.fraction": "0.3", "spark.buffer.pageSize": "1m"}
TEST_DRIVER_MEMORY = "6g"
