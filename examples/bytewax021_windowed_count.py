"""bytewax 0.21.1's windowed count (its tutorial "Introducing Windowing",
``docs/tutorials/introducing-windowing/tumbling_dataflow.py``: "This script demonstrates
how to use windowing operators in a dataflow."), with the import prefix changed from
``bytewax`` to ``flowspark`` and the CSV file's path changed from ``smoothie_order_l.csv``
(the tutorial runs from its own folder) to ``examples/sample_data/smoothie_order_l.csv``
(that tutorial's file, unchanged); nothing else (one call that bytewax wraps at 88
columns is on one line here, as ``ruff format`` puts it at this repository's 100).

It counts smoothie orders per 30-minute event-time window (``EventClock``,
``TumblingWindower``, ``count_window``) and prints each window's count and a formatted
line. bytewax 0.21.1's README has a windowing block too, but it does not run on bytewax
itself (it has no output, its timestamps such as ``"2023-1-1T00:00:00Z"`` are refused by
``datetime.fromisoformat``, and its ``calc_avg`` iterates the ``(window_id, values)`` pair
instead of the values), so this file is the runnable upstream example of a windowed count.

Run it from the repository root:
``python -m flowspark.run examples/bytewax021_windowed_count.py``
(its ``op.inspect`` steps print ``...windowed_count_orders: ('total_orders', (window_id,
count))`` and ``...output: 'Window 0    (08:00    - 08:30): 5 orders'`` for each window).
"""

# The tutorial's own ``timezone.utc`` stays as written (ruff would have ``UTC``):
# ruff: noqa: UP017

# start-imports
from datetime import datetime, timedelta, timezone
from pathlib import Path

import flowspark.operators as op
from flowspark.connectors.files import CSVSource
from flowspark.dataflow import Dataflow
from flowspark.operators.windowing import (
    EventClock,
    TumblingWindower,
    count_window,
)

# end-imports

# start-dataflow
# Create a new dataflow
flow = Dataflow("windowing_operators_examples")
# end-dataflow

# start-input
# Input stream
csv_file_path = Path("examples/sample_data/smoothie_order_l.csv")
up = op.input("orders", flow, CSVSource(csv_file_path))
# op.inspect("see_data", up)
# end-input


# start-parse
# Parse the CSV data
def parse_order(row):
    """Parse the order data from the CSV."""
    order_id = int(row["order_id"])
    time = datetime.strptime(row["time"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    order_requested = row["order_requested"]
    ingredients = row["ingredients"]
    return (order_id, time, order_requested, ingredients)


parsed = op.map("parse_order", up, parse_order)
# op.inspect("parsed", parsed)
# end-parse


# start-objective-1
# Define the clock using event timestamps
def extract_timestamp(x):
    """Extract the timestamp from the data."""
    return x[1]  # Extract the timestamp from the data


clock = EventClock(
    ts_getter=extract_timestamp,
    wait_for_system_duration=timedelta(seconds=0),
)

# Define the tumbling window of 30 minutes starting at 08:00
windower = TumblingWindower(
    length=timedelta(minutes=30),
    align_to=datetime(2024, 8, 29, 8, 0, 0, tzinfo=timezone.utc),
)

# Count the number of orders in each window
windowed = count_window(
    step_id="count_orders",
    up=parsed,
    clock=clock,
    windower=windower,
    key=lambda x: "total_orders",  # Use a constant key to aggregate all orders
)

op.inspect("windowed_count_orders", windowed.down)
# end-objective-1


# start-format-1
# Format and output the results
def format_output(item):
    """Format the output for each window."""
    key, (window_id, count) = item
    window_start = windower.align_to + timedelta(minutes=30 * window_id)
    window_end = window_start + timedelta(minutes=30)
    return f"Window {window_id}\
    ({window_start.strftime('%H:%M')}\
    - {window_end.strftime('%H:%M')}): {count} orders"


formatted = op.map("format_output", windowed.down, format_output)

# Inspect the output
op.inspect("output", formatted)
# end-format-1
