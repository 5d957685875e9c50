"""Numaflow's ``sink-log`` example image (``numaflow-rs/examples/sink-log``): prints each
message's value on a line of its own; a value that is not UTF-8 is a failure."""

from collections.abc import Iterator

from flowspark.sinker import Datum, Response, Responses, SinkServer


def print_values(datums: Iterator[Datum]) -> Responses:
    responses = Responses()
    for datum in datums:
        try:
            text = datum.value.decode("utf-8")
        except UnicodeDecodeError as exc:
            responses.append(Response.as_failure(datum.id, f"Invalid UTF-8 sequence: {exc}"))
            continue
        print(text, flush=True)
        responses.append(Response.as_success(datum.id))
    return responses


if __name__ == "__main__":
    SinkServer(print_values).start()
