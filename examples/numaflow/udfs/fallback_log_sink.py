"""Numaflow's ``fb-sink-log`` example image (``numaflow-go/examples/sinker/fallback``):
says the primary sink is under maintenance and answers every message with
``fallback``."""

from collections.abc import Iterator

from flowspark.sinker import Datum, Response, Responses, SinkServer


def under_maintenance(datums: Iterator[Datum]) -> Responses:
    responses = Responses()
    for datum in datums:
        text = datum.value.decode("utf-8", "replace")
        print(f"Primary sink under maintenance, writing to fallback sink - {text}", flush=True)
        responses.append(Response.as_fallback(datum.id))
    return responses


if __name__ == "__main__":
    SinkServer(under_maintenance).start()
