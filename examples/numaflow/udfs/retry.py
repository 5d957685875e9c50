"""Numaflow's ``map-retry`` example image (``numaflow-go/examples/mapper/retry``).

It fails a message twice and lets it through the third time: each value is
counted (per process); below 3 the value goes on tagged ``["retry"]`` (the
pipeline's edge sends it back, e.g. to this vertex), at 3 the count is forgotten
and the value goes on without tags. Keys are dropped either way.

On flowspark the counts live in each Spark Python worker; a value's rounds on a
cycle all run in the task it came in with, so its count goes 1, 2, 3 there.
Numaflow's ``10-cycle-to-self``/``10-cycle-to-prev`` pipelines run with it:
``python -m flowspark.run tests/data/numaflow/10-cycle-to-self.yaml --udf
retry=examples/numaflow/udfs/retry.py``.
"""

import json

from flowspark.mapper import Datum, MapServer, Message, Messages

SUCCESS_ITERATION = 3
counts: dict[bytes, int] = {}


def my_handler(keys: list[str], datum: Datum) -> Messages:
    value = datum.value
    count = counts.get(value, 0) + 1
    counts[value] = count
    text = value.decode("utf-8", "replace")
    print(f"count for {json.dumps(text, ensure_ascii=False)}={count}")
    if count >= SUCCESS_ITERATION:
        del counts[value]
        return Messages(Message(value))
    return Messages(Message(value, tags=["retry"]))


if __name__ == "__main__":
    grpc_server = MapServer(my_handler)
    grpc_server.start()
