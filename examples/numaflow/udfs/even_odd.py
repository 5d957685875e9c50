"""Numaflow's ``map-even-odd`` example image (``numaflow-go/examples/mapper/even_odd``).

A value that is a decimal integer (Go's ``strconv.Atoi``: optional sign, ASCII
digits) goes on with keys ``["even"]`` and tags ``["even-tag"]``, or ``["odd"]``
and ``["odd-tag"]``; anything else is dropped. The value is unchanged.
(pynumaflow's own even_odd example differs: it reads the bytes as a
little-endian integer and never drops.)

Try it: ``printf '1\\n2\\nx\\n' | python even_odd.py``.
"""

import re

from flowspark.mapper import Datum, MapServer, Message, Messages

_ATOI = re.compile(rb"[+-]?[0-9]+")


def my_handler(keys: list[str], datum: Datum) -> Messages:
    value = datum.value
    if not _ATOI.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
        return Messages(Message.to_drop())
    if int(value) % 2 == 0:
        return Messages(Message(value, keys=["even"], tags=["even-tag"]))
    return Messages(Message(value, keys=["odd"], tags=["odd-tag"]))


if __name__ == "__main__":
    grpc_server = MapServer(my_handler)
    grpc_server.start()
