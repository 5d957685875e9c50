"""bytewax run's ``-w``, ``-i``, ``-a`` and ``-b`` on ``python -m flowspark.run``: what
each sets before anything starts (the refusals: test_unit_cli_exit_codes.py; a
cluster of two processes: tests/recovery/test_cluster_main.py)."""

from __future__ import annotations

import pytest

from flowspark.cli import _parser
from flowspark.cli_scaling import check_bytewax_flags


def _checked(*argv: str):
    args = _parser().parse_args(["flow.py", *argv])
    check_bytewax_flags(args)
    return args


def test_w_alone_is_the_parallelism():
    assert _checked("-w", "3").parallelism == 3
    assert _checked("-w", "3", "--parallelism", "3").parallelism == 3
    assert _checked().parallelism is None


def test_a_lists_the_processes_and_leaves_the_parallelism_to_the_cluster():
    args = _checked("-a", "10.0.0.1:2101; 10.0.0.2:2101;", "-i", "1", "-w", "2")
    assert args.addresses == ["10.0.0.1:2101", "10.0.0.2:2101"]
    assert (args.process_id, args.workers_per_process, args.parallelism) == (1, 2, None)


def test_b_is_accepted_with_one_line_saying_it_is_not_needed(capsys: pytest.CaptureFixture[str]):
    args = _checked("-r", "recovery", "-s", "30", "-b", "0")
    assert args.backup_interval == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-b/--backup-interval is not needed" in err
