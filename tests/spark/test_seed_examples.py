"""bytewax 0.17's Dataflow documentation examples, with only the import prefix changed."""

from __future__ import annotations

from datetime import timedelta

from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingInput, TestingOutput, run_main


def test_filter_example(capsys):
    flow = Dataflow()
    flow.input("inp", TestingInput(range(4)))

    def is_odd(item):
        return item % 2 != 0

    flow.filter(is_odd)
    flow.output("out", StdOutput())
    run_main(flow)
    assert capsys.readouterr().out == "1\n3\n"


def test_filter_map_example_builds_and_runs():
    flow = Dataflow()

    def validate(data):
        if type(data) != dict or "key" not in data:  # noqa: E721 - the page's code
            return None
        else:
            return data["key"], data

    assert flow.filter_map(validate) is None
    # The page stops there; feed it to see the documented behaviour.
    flow.input("inp", TestingInput([{"key": "a", "v": 1}, 5, {"no": 1}, {"key": "b"}]))
    flow.filter_map(validate)
    out = []
    flow.output("out", TestingOutput(out))
    run_main(flow)
    assert out == [("a", {"key": "a", "v": 1}), ("b", {"key": "b"})]


def test_flat_map_example(capsys):
    flow = Dataflow()
    inp = ["hello world"]
    flow.input("inp", TestingInput(inp))

    def split_into_words(sentence):
        return sentence.split()

    flow.flat_map(split_into_words)
    flow.output("out", StdOutput())
    run_main(flow)
    assert capsys.readouterr().out == "hello\nworld\n"


def test_inspect_example(capsys):
    flow = Dataflow()
    flow.input("inp", TestingInput(range(3)))

    def log(item):
        print("Saw", item)

    flow.inspect(log)
    out = []
    flow.output("out", TestingOutput(out))  # Notice we don't print out.
    run_main(flow)
    assert capsys.readouterr().out == "Saw 0\nSaw 1\nSaw 2\n"
    assert out == [0, 1, 2]


def test_inspect_epoch_example(capsys):
    flow = Dataflow()
    flow.input("inp", TestingInput(range(3)))

    def log(epoch, item):
        print(f"Saw {item} @ {epoch}")

    flow.inspect_epoch(log)
    out = []
    flow.output("out", TestingOutput(out))
    run_main(flow, epoch_interval=timedelta(seconds=0))
    assert capsys.readouterr().out == "Saw 0 @ 1\nSaw 1 @ 2\nSaw 2 @ 3\n"


def test_map_example(capsys):
    flow = Dataflow()
    flow.input("inp", TestingInput(range(3)))

    def add_one(item):
        return item + 10

    flow.map(add_one)
    flow.output("out", StdOutput())
    run_main(flow)
    assert capsys.readouterr().out == "10\n11\n12\n"
