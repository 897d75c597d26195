#!/usr/bin/env bash
# The lagscope image's entrypoint.
#   executor …  a Spark executor on Kubernetes: spark-submit (the analytics CronJob) starts
#               executor pods from this image with the argument "executor" and describes the
#               executor in SPARK_* environment variables
#   anything    run as given: `lagscope run --config …`, `lagscope ui …`, `spark-submit …`
set -euo pipefail

if [ "${1:-}" = "executor" ]; then
  shift
  : "${SPARK_DRIVER_URL:?SPARK_DRIVER_URL is not set (this mode is for pods spark-submit creates)}"
  : "${SPARK_EXECUTOR_ID:?SPARK_EXECUTOR_ID is not set}"
  # spark-submit passes the executor's JVM options as SPARK_JAVA_OPT_0, _1, …
  java_opts=()
  while IFS='=' read -r name _; do
    java_opts+=("${!name}")
  done < <(env | grep -E '^SPARK_JAVA_OPT_[0-9]+=' | sort -t_ -k4 -n)
  memory="${SPARK_EXECUTOR_MEMORY:-1g}"
  exec java "${java_opts[@]}" -Xms"$memory" -Xmx"$memory" \
    -cp "${SPARK_HOME}/conf:${SPARK_HOME}/jars/*${SPARK_EXTRA_CLASSPATH:+:$SPARK_EXTRA_CLASSPATH}" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "$SPARK_DRIVER_URL" \
    --executor-id "$SPARK_EXECUTOR_ID" \
    --cores "${SPARK_EXECUTOR_CORES:-1}" \
    --app-id "$SPARK_APPLICATION_ID" \
    --hostname "${SPARK_EXECUTOR_POD_IP:-$(hostname -i)}" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
    --podName "${SPARK_EXECUTOR_POD_NAME:-$(hostname)}"
fi

if [ "$#" -eq 0 ]; then
  exec lagscope --help
fi
exec "$@"
