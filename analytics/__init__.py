"""lagscope's analytics: one engine. Every rule is vectorised code over Arrow, in two passes, and
Spark distributes them (docs/analytics.md).

Where things are:

- Spark: :mod:`.job` (a step as one Spark job: route the files into buckets of groups, one
  shuffle, the passes per bucket, publish), :mod:`.session`, :mod:`.io`, :mod:`.cli`.
- One step over a bucket of whole groups: :mod:`.step` (both passes, the result tables, the state);
  the advice: :mod:`.advice`.
- The per-partition pass: :mod:`.onepass` over :mod:`.kseries` (running values) and
  :mod:`.kernel` (lag in seconds); its rules in :mod:`.np_status`, :mod:`.np_episodes` (stall,
  stop, retention loss), :mod:`.np_points` (rewind, skip), :mod:`.np_gaps` (commit gaps),
  :mod:`.np_growth` (lag growth), :mod:`.np_state` (the carried state).
- The per-group pass: :mod:`.groups` (member sweeps, rebalance windows, causes, bounds, storms,
  the outages a rebalance explains).
- The tables: :mod:`.trends` (``lag_trends``), :mod:`.status` (``status``), :mod:`.findings`
  (the anomaly rules' statement); thresholds in :mod:`.params`.
"""
