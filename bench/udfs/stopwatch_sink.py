"""A blackhole with a stopwatch: notes ``<id> <ms since the epoch>`` per datum in the
file ``$STOPWATCH_FILE`` (for bench/http_ingest.py), then forgets the datum."""

import os
import time

from flowspark.sinker import Response, Responses, Sinker, SinkServer


class StopwatchSink(Sinker):
    def __init__(self) -> None:
        self.path = os.environ.get("STOPWATCH_FILE", "stopwatch.txt")

    def handler(self, datums):
        now = int(time.time() * 1000)
        responses = Responses()
        lines = []
        for datum in datums:
            # The HTTP source's id travels in the headers; map outputs get derived ids.
            event_id = (datum.headers or {}).get("X-Numaflow-Id") or datum.id
            lines.append(f"{event_id} {now}\n")
            responses.append(Response.as_success(datum.id))
        with open(self.path, "a") as f:
            f.writelines(lines)
        return responses


if __name__ == "__main__":
    SinkServer(StopwatchSink()).start()
