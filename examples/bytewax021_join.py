"""bytewax 0.21.1's join example (its ``examples/join.py``), with the import prefix
changed from ``bytewax`` to ``flowspark`` and nothing else (two calls that bytewax wraps
at 88 columns are on one line here, as ``ruff format`` puts them at this repository's 100).

It joins four keyed streams (a name, an email, and a color and a sound taken from one
input) on the user id with ``op.join``'s defaults (``insert_mode="last"``,
``emit_mode="complete"``), so it emits once, when every side has a value for the key.

Run it from the repository root: ``python -m flowspark.run examples/bytewax021_join.py``
(it prints ``('123', ('Bumble', 'bee@bytewax.com', 'yellow', 'buzz'))``).
"""

from flowspark import operators as op
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource

flow = Dataflow("join")


def key_getter(x):
    return str(x["user_id"])


inp1 = op.input("inp1", flow, TestingSource([{"user_id": 123, "name": "Bumble"}]))
k_inp1 = op.key_on("k1", inp1, key_getter)
name = op.map_value("name", k_inp1, lambda x: x["name"])
inp2 = op.input("inp2", flow, TestingSource([{"user_id": 123, "email": "bee@bytewax.com"}]))
k_inp2 = op.key_on("k2", inp2, key_getter)
email = op.map_value("email", k_inp2, lambda x: x["email"])
inp3 = op.input("inp3", flow, TestingSource([{"user_id": 123, "color": "yellow", "sound": "buzz"}]))
k_inp3 = op.key_on("k3", inp3, key_getter)
color = op.map_value("color", k_inp3, lambda x: x["color"])
sound = op.map_value("sound", k_inp3, lambda x: x["sound"])

joined = op.join("j1", name, email, color, sound)
op.output("out", joined, StdOutSink())
