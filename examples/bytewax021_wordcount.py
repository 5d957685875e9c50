"""bytewax 0.21.1's wordcount example (its ``examples/wordcount.py``), with the import
prefix changed from ``bytewax`` to ``flowspark`` and nothing else.

Run it from the repository root: ``python -m flowspark.run examples/bytewax021_wordcount.py``
(it prints each ``(word, count)`` once the file has been read).
"""

import re

import flowspark.operators as op
from flowspark.connectors.files import FileSource
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow


def lower(line):
    return line.lower()


def tokenize(line):
    return re.findall(r'[^\s!,.?":;0-9]+', line)


flow = Dataflow("wordcount")
stream = op.input("inp", flow, FileSource("examples/sample_data/wordcount.txt"))
# Full line WITH uppercase
stream = op.map("lower", stream, lower)
# full line lowercased
stream = op.flat_map("tokenize", stream, tokenize)
# "word"
count_stream = op.count_final("count", stream, lambda word: word)
# ("word", count)
op.output("out", count_stream, StdOutSink())
