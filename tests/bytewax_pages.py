"""bytewax 0.17's Dataflow page examples (the import prefix aside), for the tests that
build, draw or run them: the pages' functions, and their flows over a given input and
output."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput
from flowspark.window import EventClockConfig, TumblingWindow

# -- reduce: the sessionizer -------------------------------------------------------------


def user_as_key(event):
    return event["user"], [event]


def extend_session(session, events):
    session.extend(events)
    return session


def session_complete(session):
    return any(event["type"] == "logout" for event in session)


SESSION_EVENTS = [
    {"user": "a", "type": "login"},
    {"user": "a", "type": "post"},
    {"user": "b", "type": "login"},
    {"user": "b", "type": "logout"},
    {"user": "a", "type": "logout"},
]


def sessionizer_example(inp: list[Any], output: Any) -> Dataflow:
    flow = Dataflow()
    flow.input("inp", TestingInput(inp))
    flow.map(user_as_key)
    flow.reduce("sessionizer", extend_session, session_complete)
    flow.output("out", output)
    return flow


# -- stateful_map: remove duplicates -----------------------------------------------------


def build_count():
    return 0


def check(running_count, item):
    running_count += 1
    if running_count == 1:
        return running_count, item
    else:
        return running_count, None


def self_as_key(item):
    return item, item


def remove_none_and_key(key_item):
    key, item = key_item
    if item is None:
        return []
    else:
        return [item]


def remove_duplicates_example(inp: list[Any], output: Any) -> Dataflow:
    flow = Dataflow()
    flow.input("inp", TestingInput(inp))
    flow.map(self_as_key)
    flow.stateful_map("remove_duplicates", build_count, check)
    flow.flat_map(remove_none_and_key)
    flow.output("out", output)
    return flow


# -- reduce_window: count per 10 s ---------------------------------------------------------


def add(acc, x):
    acc["val"] += x["val"]
    return acc


def extract_val(key__event):
    key, event = key__event
    return (key, event["val"])


def reduce_window_example(inp: list[Any], output: Any, align_to: datetime) -> Dataflow:
    flow = Dataflow()
    flow.input("inp", TestingInput(inp))
    clock_config = EventClockConfig(lambda e: e["time"], wait_for_system_duration=timedelta(0))
    window_config = TumblingWindow(length=timedelta(seconds=10), align_to=align_to)
    flow.reduce_window("count", clock_config, window_config, add)
    flow.map(extract_val)
    flow.output("out", output)
    return flow
