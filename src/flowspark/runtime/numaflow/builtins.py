"""Numaflow's pre-1.6 builtin UDFs and source transformers, as functions of datums.

Numaflow ≤ v1.5 let a map vertex say ``udf.builtin: {name: cat|filter}`` and a
source say ``transformer.builtin: {name: filter|eventTimeExtractor|
timeExtractionFilter, kwargs: {...}}`` (removed in v1.6). Each builtin here is
a picklable callable ``Datum -> list[Datum]`` for a ``flat_map`` step. Every
output copies its parent's event time (unless the builtin sets it), watermark,
headers and id, and has no tags.

>>> from flowspark.api.udf.times import utc_from_ms
>>> t = utc_from_ms(1_700_000_000_000)
>>> d = Datum(["k"], b'{"id": 5, "at": "2024-01-02T03:04:05Z"}', t, t, {"h": "1"}, id="m-1")
>>> [(o.keys, o.value) for o in build_map_builtin("cat", [], {})(d)]
[(['k'], b'{"id": 5, "at": "2024-01-02T03:04:05Z"}')]
>>> filter_id = build_map_builtin("filter", [], {"expression": "int(json(payload).id) < 100"})
>>> [(o.keys, o.headers, o.id) for o in filter_id(d)]
[([], {'h': '1'}, 'm-1')]
>>> at = {"expression": "json(payload).at"}
>>> (out,) = build_transformer_builtin("eventTimeExtractor", [], at)(d)
>>> out.event_time.isoformat(), out.keys
('2024-01-02T03:04:05+00:00', ['k'])
>>> builtin_for_image("quay.io/numaio/numaflow-go/map-filter-id:stable")
('filter', {'expression': 'int(json(payload).id) < 100'})

Time strings are parsed as Numaflow's Go code did (Go layouts, dateparse):
:mod:`flowspark.runtime.numaflow.gotime`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flowspark.api.udf.times import UTCDateTime
from flowspark.api.udf.types import Datum
from flowspark.runtime.numaflow.convert import step_datum
from flowspark.runtime.numaflow.expr import ExprError, compile_expression, payload_env
from flowspark.runtime.numaflow.gotime import parse_event_time

__all__ = [
    "Cat",
    "MapFilter",
    "TransformFilter",
    "EventTimeExtractor",
    "TimeExtractionFilter",
    "MAP_BUILTINS",
    "TRANSFORMER_BUILTINS",
    "build_map_builtin",
    "build_transformer_builtin",
    "IMAGE_BUILTINS",
    "builtin_for_image",
]

_LOG = logging.getLogger(__name__)

BuiltinFn = Callable[[Datum], list[Datum]]


def _datum(item: Any) -> Datum:
    return item if isinstance(item, Datum) else step_datum(item, "a Numaflow builtin")


def _child(parent: Datum, keys: list[str], event_time: UTCDateTime | None = None) -> Datum:
    """An output of ``parent``: its value, watermark, headers and id; no tags."""
    return Datum._make(
        keys,
        parent._value,
        parent._event_time if event_time is None else event_time,
        parent._watermark,
        parent._headers,
        parent._id,
        [],
    )


def _required(kwargs: Mapping[str, Any], name: str) -> str:
    if name not in kwargs:
        raise ValueError(f'missing "{name}"')
    return _string_kwarg(kwargs, name)


def _string_kwarg(kwargs: Mapping[str, Any], name: str) -> str:
    value = kwargs[name]
    if not isinstance(value, str):
        raise ValueError(f'kwarg "{name}" must be a string; got {value!r}')
    return value


class _Builtin:
    """Shared by the builtins: log the first evaluation error, then only at debug level."""

    _warned = False

    def _failed(self, what: str, error: Exception) -> None:
        if self._warned:
            _LOG.debug("%s: %s", what, error)
        else:
            self._warned = True
            _LOG.warning("%s: %s (later errors are logged at debug level)", what, error)


class Cat(_Builtin):
    """``cat``: the datum as it is (same value, same keys), without tags."""

    def __call__(self, item: Any) -> list[Datum]:
        datum = _datum(item)
        return [_child(datum, list(datum._keys))]

    def __repr__(self) -> str:
        return "Cat()"


class MapFilter(_Builtin):
    """Map ``filter``: pass the value **without keys** when ``expression`` is true;
    drop it when false or when the expression fails."""

    def __init__(self, expression: str) -> None:
        self.expression = compile_expression(expression)

    def _keep(self, datum: Datum) -> bool:
        try:
            return self.expression.eval_bool(payload_env(datum._value))
        except ExprError as exc:
            self._failed("filter dropped a message", exc)
            return False

    def __call__(self, item: Any) -> list[Datum]:
        datum = _datum(item)
        return [_child(datum, [])] if self._keep(datum) else []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.expression.text!r})"


class TransformFilter(MapFilter):
    """Transformer ``filter``: like the map one, but the keys are kept."""

    def __call__(self, item: Any) -> list[Datum]:
        datum = _datum(item)
        return [_child(datum, list(datum._keys))] if self._keep(datum) else []


class EventTimeExtractor(_Builtin):
    """``eventTimeExtractor``: the event time becomes ``expression`` (a time string)
    parsed with the Go layout ``format``, or like dateparse without one. Any
    failure keeps the original event time. Keys are kept."""

    def __init__(self, expression: str, format: str | None = None) -> None:
        self.expression = compile_expression(expression)
        self.format = format or None

    def _extract(self, datum: Datum) -> list[Datum]:
        try:
            text = self.expression.eval_str(payload_env(datum._value))
            event_time = parse_event_time(text, self.format)
        except (ExprError, ValueError) as exc:
            self._failed("event time extractor kept the event time", exc)
            return [_child(datum, list(datum._keys))]
        return [_child(datum, list(datum._keys), event_time)]

    def __call__(self, item: Any) -> list[Datum]:
        return self._extract(_datum(item))

    def __repr__(self) -> str:
        return f"EventTimeExtractor({self.expression.text!r}, format={self.format!r})"


class TimeExtractionFilter(EventTimeExtractor):
    """``timeExtractionFilter``: drop unless ``filter_expr`` is true, then extract the
    event time as :class:`EventTimeExtractor` does."""

    def __init__(
        self, filter_expr: str, event_time_expr: str, event_time_format: str | None = None
    ) -> None:
        super().__init__(event_time_expr, event_time_format)
        self.filter = TransformFilter(filter_expr)

    def __call__(self, item: Any) -> list[Datum]:
        datum = _datum(item)
        return self._extract(datum) if self.filter._keep(datum) else []

    def __repr__(self) -> str:
        return (
            f"TimeExtractionFilter({self.filter.expression.text!r}, "
            f"{self.expression.text!r}, event_time_format={self.format!r})"
        )


# ------------------------------------------------------------------------- registry


def _optional(kwargs: Mapping[str, Any], name: str) -> str | None:
    return _string_kwarg(kwargs, name) if name in kwargs else None


MAP_BUILTINS: dict[str, Callable[[Mapping[str, Any]], BuiltinFn]] = {
    "cat": lambda kwargs: Cat(),
    "filter": lambda kwargs: MapFilter(_required(kwargs, "expression")),
}
"""``udf.builtin.name`` → a factory taking the builtin's ``kwargs``."""

TRANSFORMER_BUILTINS: dict[str, Callable[[Mapping[str, Any]], BuiltinFn]] = {
    "filter": lambda kwargs: TransformFilter(_required(kwargs, "expression")),
    "eventTimeExtractor": lambda kwargs: EventTimeExtractor(
        _required(kwargs, "expression"), _optional(kwargs, "format")
    ),
    "timeExtractionFilter": lambda kwargs: TimeExtractionFilter(
        _required(kwargs, "filterExpr"),
        _required(kwargs, "eventTimeExpr"),
        _optional(kwargs, "eventTimeFormat"),
    ),
}
"""``source.transformer.builtin.name`` → a factory taking the builtin's ``kwargs``."""


def _build(
    table: Mapping[str, Callable[[Mapping[str, Any]], BuiltinFn]],
    what: str,
    name: str,
    kwargs: Mapping[str, Any] | None,
) -> BuiltinFn:
    factory = table.get(name)
    if factory is None:
        raise ValueError(f"unrecognized {what} {json.dumps(name)}")
    return factory(kwargs or {})


def build_map_builtin(
    name: str, args: Sequence[str] | None = None, kwargs: Mapping[str, Any] | None = None
) -> BuiltinFn:
    """The map builtin ``name``. ``args`` are ignored (as Numaflow did); an unknown name
    raises ``ValueError('unrecognized function "name"')``, a missing kwarg
    ``ValueError('missing "expression"')``, a bad expression :class:`ValueError` too."""
    return _build(MAP_BUILTINS, "function", name, kwargs)


def build_transformer_builtin(
    name: str, args: Sequence[str] | None = None, kwargs: Mapping[str, Any] | None = None
) -> BuiltinFn:
    """The source-transformer builtin ``name`` (Numaflow's error for an unknown name is
    ``unrecognized transformer "name"``); otherwise as :func:`build_map_builtin`."""
    return _build(TRANSFORMER_BUILTINS, "transformer", name, kwargs)


_FILTER_ID = "int(json(payload).id) < 100"

IMAGE_BUILTINS: dict[str, tuple[str, dict[str, str]]] = {
    "map-cat": ("cat", {}),  # go and rs examples/map-cat
    "map-forward-message": ("cat", {}),  # go examples/mapper/forward_message
    "map-filter-id": ("filter", {"expression": _FILTER_ID}),  # "pass ids less than 100"
}
"""Numaflow example images (by the image name's last path segment) that are builtins."""


def builtin_for_image(image: str) -> tuple[str, dict[str, str]] | None:
    """``(builtin name, kwargs)`` standing for a Numaflow example image, or ``None``.

    >>> builtin_for_image("quay.io/numaio/numaflow-rs/map-cat:stable")
    ('cat', {})
    >>> builtin_for_image("quay.io/numaio/numaflow-go/map-even-odd:stable") is None
    True
    """
    name = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    found = IMAGE_BUILTINS.get(name)
    return None if found is None else (found[0], dict(found[1]))
