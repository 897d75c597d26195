"""Test helpers shared across test folders (real Prometheus, …)."""

#: Spark settings every test session adds to build_session's. One long-lived local session runs
#: hundreds of small plans: the context cleaner frees the broadcasts and shuffles of finished
#: queries only once the driver's JVM collects them (its periodic GC: every 30 minutes by
#: default), and until then their blocks hold memory a later statement's stage may need (CI:
#: AGGREGATE_OUT_OF_MEMORY on a few hundred rows, late in a full run, that passes alone).
TEST_SPARK_CONF = {"spark.cleaner.periodicGC.interval": "1min"}
