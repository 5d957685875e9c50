"""flowspark quickstart: a bytewax-style flow on embedded Spark.

Run it with ``python -m flowspark.run examples/quickstart.py --bounded``.
It reads ``data/poem.txt`` line by line, splits lines into words, drops short
words, and prints each word with its length; long words also go to a branch
that is printed separately.
"""

from pathlib import Path

from flowspark.connectors.files import FileInput
from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow

POEM = Path(__file__).parent / "data" / "poem.txt"

flow = Dataflow()
lines = flow.input("poem", FileInput(POEM))
words = lines.flat_map("split", str.split).map("lower", str.lower)
kept = words.filter("drop_short", lambda w: len(w) > 3)
long_words, _ = kept.branch("is_long", lambda w: len(w) >= 6)
kept.map("with_length", lambda w: f"{w:>10} {len(w)}").output("print", StdOutput())
long_words.map("mark_long", lambda w: f"long word: {w}").output("print_long", StdOutput())
