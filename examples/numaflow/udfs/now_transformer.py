"""Numaflow's ``source-transformer-now`` example image
(``numaflow-rs/examples/source-transformer-now``): each message keeps its value and
keys and gets the current time as its event time."""

from datetime import UTC, datetime

from flowspark.sourcetransformer import Datum, Message, Messages, SourceTransformServer


def now(keys: list[str], datum: Datum) -> Messages:
    return Messages(Message(datum.value, datetime.now(UTC), keys=keys))


if __name__ == "__main__":
    SourceTransformServer(now).start()
