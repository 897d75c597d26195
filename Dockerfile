# syntax=docker/dockerfile:1
# The lagscope image: the CLI (collector, analytics, app, webhook sink), pyspark with its jars
# (spark-submit, spark-class) and a Java 17 runtime. The same image is the Spark driver and the
# Spark executors on Kubernetes (see deploy/docker/entrypoint.sh).
#
#   docker build -t lagscope:local .
#   docker run --rm lagscope:local lagscope --help
#
# Built from the locked environment (uv.lock), without the development tools.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG MAVEN_IMAGE=maven:3.9-eclipse-temurin-17

FROM ${PYTHON_IMAGE} AS build
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=/opt/lagscope/.venv
RUN pip install --no-cache-dir "uv>=0.5"
WORKDIR /src
# dependencies first (a layer that changes only with the lock file) …
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
# … then lagscope itself, installed as a package (not editable)
COPY lagscope/ lagscope/
COPY collector/ collector/
COPY analytics/ analytics/
COPY dashboards/ dashboards/
COPY app/ app/
COPY alerts/ alerts/
COPY burrow/ burrow/
COPY deploy/ deploy/
COPY devtools/ devtools/
RUN uv sync --frozen --no-dev --no-editable

# Spark's s3a:// connector: the jars deploy/spark/pom.xml pins (hadoop-aws of pyspark's Hadoop
# and its AWS SDK), from Maven Central, onto the driver's and executors' class path
# (`lagscope spark s3a-conf --jars /opt/lagscope/s3a-jars`, the Helm chart's CronJob)
FROM ${MAVEN_IMAGE} AS s3a-jars
COPY deploy/spark/pom.xml /src/pom.xml
RUN mvn -q -B -f /src/pom.xml -Ds3a.jars=/opt/s3a-jars dependency:copy-dependencies

FROM ${PYTHON_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 lagscope \
 && useradd --uid 10001 --gid 10001 --home-dir /var/lib/lagscope --create-home --shell /usr/sbin/nologin lagscope
COPY --from=build /opt/lagscope/.venv /opt/lagscope/.venv
COPY deploy/docker/entrypoint.sh /opt/lagscope/entrypoint.sh
COPY deploy/spark/entry.py /opt/lagscope/spark-entry.py
COPY --from=s3a-jars /opt/s3a-jars /opt/lagscope/s3a-jars
ENV PATH=/opt/lagscope/.venv/bin:$PATH \
    SPARK_HOME=/opt/lagscope/.venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/lagscope/.venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/lagscope/.venv/bin/python \
    PYTHONUNBUFFERED=1 \
    LAGSCOPE_S3A_JARS=/opt/lagscope/s3a-jars
USER 10001:10001
WORKDIR /var/lib/lagscope
# collector /metrics, the app, the webhook sink, the Spark driver and block manager
EXPOSE 9839 8501 8080 7078 7079
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/lagscope/entrypoint.sh"]
CMD ["lagscope", "--help"]
