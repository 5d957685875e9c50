"""pynumaflow's side-input example (``examples/sideinput/simple_sideinput/example.py``),
with only the import prefix changed (``pynumaflow.`` -> ``flowspark.``).

Each retrieval broadcasts "an example: <now>" every other time. Its pipeline,
Numaflow's ``pipeline.yaml`` of the example unchanged (a generator, the side-input
UDF ``sideinput_udf.py``, a log sink)::

    python -m flowspark.run simple_sideinput.yaml \\
        --udf myticker=simple_sideinput.py --udf si-log=sideinput_udf.py

Alone, ``python simple_sideinput.py`` retrieves once and prints the response.
"""

# The example stays as written (ruff would sort its imports):
# ruff: noqa: I001
import datetime
from flowspark.sideinput import Response, SideInputServer, SideInput


class ExampleSideInput(SideInput):
    def __init__(self):
        self.counter = 0

    def retrieve_handler(self) -> Response:
        """
        This function is called every time the side input is requested.
        """
        time_now = datetime.datetime.now()
        # val is the value to be broadcasted
        val = f"an example: {str(time_now)}"
        self.counter += 1
        # broadcast every other time
        if self.counter % 2 == 0:
            # no_broadcast_message() is used to indicate that there is no broadcast
            return Response.no_broadcast_message()
        # broadcast_message() is used to indicate that there is a broadcast
        return Response.broadcast_message(val.encode("utf-8"))


if __name__ == "__main__":
    grpc_server = SideInputServer(ExampleSideInput())
    grpc_server.start()
