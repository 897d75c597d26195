"""lagscope's development tools: what tests, demos and development on one machine need, and
production never runs.

- :mod:`.broker`: a real single-node Kafka broker (KRaft) on 127.0.0.1 (``lagscope broker …``);
- :mod:`.sim`: the scenario simulator, real producers and consumer groups with injected faults
  (``lagscope sim …``);
- :mod:`.demo`: the whole product on loopback (``lagscope demo``, ``make demo``);
- :mod:`.sink`: a webhook receiver for the alerts (``lagscope webhook-sink``);
- :mod:`.spark_standalone`: a Spark standalone master and workers on 127.0.0.1
  (``lagscope spark start``/``stop``).

The tools may import any part of lagscope; no part of the product imports them
(docs/architecture.md, tests/test_architecture.py). Their commands come in through one door,
:mod:`.cli`.
"""
