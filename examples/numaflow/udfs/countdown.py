"""A map UDF that sends each event round a cycle ``ROUNDS`` times, then lets it go.

``"id"`` comes in; ``"id|n"`` goes on tagged ``["again"]`` (the pipeline's edge back
to this vertex) until ``n`` reaches 1, then ``"id"`` leaves untagged. The count rides
in the value, so it survives a restart and any Python worker. With more rounds than a
micro-batch runs, the events wait in the cycle's keyed state between batches:
``tests/data/numaflow/countdown-cycle.yaml`` runs it
(``python -m flowspark.run tests/data/numaflow/countdown-cycle.yaml --udf
countdown=examples/numaflow/udfs/countdown.py``).
"""

from flowspark.mapper import Datum, MapServer, Message, Messages

ROUNDS = 250


def handler(keys: list[str], datum: Datum) -> Messages:
    event_id, _, left = datum.value.decode().partition("|")
    n = int(left) if left else ROUNDS
    if n <= 1:
        return Messages(Message(event_id.encode()))
    return Messages(Message(f"{event_id}|{n - 1}".encode(), tags=["again"]))


if __name__ == "__main__":
    MapServer(handler).start()
