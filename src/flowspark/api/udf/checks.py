"""Checks of Numaflow step arguments, shared by the API (at flow build time) and
the runtime objects built from them, and Numaflow's rule for forwarding by tags.

>>> check_route(["a"], "xor")
Traceback (most recent call last):
...
ValueError: route: operator must be 'or', 'and' or 'not'; got 'xor'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["ROUTE_OPERATORS", "check_datum_functions", "check_route", "tags_match"]

ROUTE_OPERATORS = ("or", "and", "not")


def check_datum_functions(step_id: str, fns: dict[str, Any]) -> None:
    """``to_datums``: every given field maker must be a function of the item."""
    for name, fn in fns.items():
        if fn is not None and not callable(fn):
            raise TypeError(
                f"to_datums {step_id!r}: {name} must be a function of the item; got {fn!r:.80}"
            )


def check_route(tags: Any, operator: str) -> None:
    """``route``: ``tags`` a list of ``str``, ``operator`` one of ``or``/``and``/``not``."""
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise TypeError(f"route: tags must be a list of str; got {tags!r:.100}")
    if operator not in ROUTE_OPERATORS:
        raise ValueError(f"route: operator must be 'or', 'and' or 'not'; got {operator!r}")


def tags_match(wanted: frozenset[str], operator: str, tags: Iterable[str]) -> bool:
    """Numaflow's forwarding rule (``should_forward``): whether a message with ``tags``
    meets a condition on ``wanted`` tags: ``or`` any of them, ``and`` all, ``not`` none.
    No ``wanted`` tags: every message does; an unknown operator: none does.

    >>> tags_match(frozenset("ab"), "or", ["b"]), tags_match(frozenset("a"), "not", ["a"])
    (True, False)
    """
    if not wanted:
        return True
    if operator == "or":
        return not wanted.isdisjoint(tags)
    if operator == "and":
        return wanted.issubset(tags)
    if operator == "not":
        return wanted.isdisjoint(tags)
    return False
