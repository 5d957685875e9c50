"""Numaflow's pre-1.6 builtins, their expression language, the source-transformer face,
pynumaflow's root names and the example handlers for Numaflow's example images.

Pure Python, no Spark.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import logging
import pickle
import runpy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import flowspark
from flowspark.api.udf.servers import capturing_servers, handler_factory
from flowspark.api.udf.times import as_utc, utc_from_ms
from flowspark.api.udf.types import DROP, Datum
from flowspark.runtime.numaflow.builtins import (
    IMAGE_BUILTINS,
    MAP_BUILTINS,
    TRANSFORMER_BUILTINS,
    build_map_builtin,
    build_transformer_builtin,
    builtin_for_image,
)
from flowspark.runtime.numaflow.expr import (
    ExprError,
    ExprSyntaxError,
    compile_expression,
    go_atoi,
    go_format,
    payload_env,
)
from flowspark.runtime.numaflow.gotime import parse_date_strict, parse_event_time, parse_go_time
from flowspark.runtime.numaflow.run import run_map_stream
from flowspark.runtime.numaflow.transform import TransformRunner
from flowspark.sourcetransformer import Datum as TransformDatum
from flowspark.sourcetransformer import (
    Message,
    Messages,
    SourceTransformAsyncServer,
    SourceTransformer,
    SourceTransformMultiProcServer,
    SourceTransformServer,
)
from tests.pynumaflow_servers import parameter_names, server_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "numaflow" / "udfs"
T0 = utc_from_ms(1_700_000_000_000)
WM = utc_from_ms(1_699_999_990_000)
FILTER_ID = "int(json(payload).id) < 100"
HELLO_GOOD = "json(payload).msg == 'hello' && sprig.contains('good', string(json(payload).desc))"


def datum(value: bytes | str, keys: list[str] | None = None, **kw: Any) -> Datum:
    raw = value.encode() if isinstance(value, str) else value
    return Datum(
        ["k1", "k2"] if keys is None else keys,
        raw,
        kw.pop("event_time", T0),
        kw.pop("watermark", WM),
        kw.pop("headers", {"h": "v"}),
        id=kw.pop("id", "msg-1"),
        tags=kw.pop("tags", None),
    )


def evaluate(expression: str, payload: bytes | str) -> Any:
    raw = payload.encode() if isinstance(payload, str) else payload
    return compile_expression(expression).eval(payload_env(raw))


# -- the expression language ---------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "payload", "expected"),
    [
        (FILTER_ID, '{"id": 5}', True),
        (FILTER_ID, '{"id": 100}', False),
        (FILTER_ID, '{"id": "7"}', True),
        (FILTER_ID, '{"id": 99.9}', True),
        (FILTER_ID, '{"id": -3}', True),
        (HELLO_GOOD, '{"msg": "hello", "desc": "a good day"}', True),
        (HELLO_GOOD, '{"msg": "hello", "desc": "a bad day"}', False),
        (HELLO_GOOD, '{"msg": "bye", "desc": "good"}', False),
        (HELLO_GOOD, '{"msg": "hello"}', False),  # string(nil) == ""
        ('json(payload).a == "b"', '{"a": "b"}', True),
        ('json(payload).a == "c"', '{"a": "b"}', False),
        ("payload == 'raw text'", "raw text", True),
        ("payload contains 'x'", "axb", True),
        ("payload startsWith 'ab' and payload endsWith 'yz'", "abxyz", True),
        ("payload matches '^[0-9]+$'", "12345", True),
        ("not (payload matches '^[0-9]+$')", "12a", True),
        ("json(payload).item[1].time", '{"item": [{"time": "a"}, {"time": "b"}]}', "b"),
        ("json(payload)['a']['b']", '{"a": {"b": true}}', True),
        ("json(payload).n", '{"n": 3}', 3.0),  # JSON numbers are float64
        ("json(payload).missing", "{}", None),
        ("json(payload).missing == nil", "{}", True),
        ("json(payload)?.a.b", "{}", None),  # nil-safe from `?.` on
        ("len(json(payload).xs) == 3", '{"xs": [1, 2, 3]}', True),
        ("len(payload)", "héllo", 6),  # bytes, as in Go
        ("int('42') + 1", "", 43),
        ("int('+7') * 2", "", 14),
        ("int(2.9)", "", 2),
        ("string(1.5) + string(true) + string(nil)", "", "1.5true"),
        ("7 / 2", "", 3),  # int / int is an int
        ("-7 / 2", "", -3),
        ("7.0 / 2", "", 3.5),
        ("-7 % 3", "", -1),
        ("2 ** 3", "", 8.0),
        ("1 + 2 * 3 - 4", "", 3),
        ("(1 + 2) * 3", "", 9),
        ("1 < 2 && 2 <= 2 && 3 > 2 && 3 >= 3 && 1 != 2", "", True),
        ("1 == 1.0", "", True),
        ("'1' == 1", "", False),
        ("'a' < 'b'", "", True),
        ("true || 1 / 0 == 0", "", True),  # short circuit
        ("false && 1 / 0 == 0", "", False),
        ("!true or not false", "", True),
        ("2 in [1, 2, 3] and 5 not in [1, 2]", "", True),
        ("'a' in {a: 1}", "", True),
        ("1..3", "", [1, 2, 3]),
        ("[1, 2, 3][1:]", "", [2, 3]),
        ("1 > 0 ? 'yes' : 'no'", "", "yes"),
        ("0x10 + 1_000", "", 1016),
        ("'tab\\there' == \"tab\\u0009here\"", "", True),
        ("sprig.trim('  x  ')", "", "x"),
        ("sprig.upper('ab') + sprig.lower('CD')", "", "ABcd"),
        ("sprig.hasPrefix('ab', 'abc') && sprig.hasSuffix('bc', 'abc')", "", True),
        ("sprig.b64dec('aGVsbG8=')", "", "hello"),
        ("sprig.b64dec(json(payload).data) == 'hi'", '{"data": "aGk="}', True),
        ("sprig.b64dec('%%%')", "", "illegal base64 data at input byte 0"),
        ("sprig.replace('a', 'b', 'aXa')", "", "bXb"),
        ("sprig.toString(12)", "", "12"),
    ],
)
def test_expressions_evaluate_like_numaflow(expression, payload, expected):
    result = evaluate(expression, payload)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("expression", "payload", "message"),
    [
        (FILTER_ID, '{"id": "x"}', 'cannot convert "x" to int'),
        (FILTER_ID, '{"id": "1700000000-0"}', "cannot convert"),
        (FILTER_ID, '{"id": " 5"}', "cannot convert"),  # Atoi takes no spaces
        (FILTER_ID, '{"id": "99999999999999999999"}', "cannot convert"),  # int64 range
        (FILTER_ID, "{}", "cannot convert <nil> to int"),
        (FILTER_ID, "not json", "to object"),
        (FILTER_ID, "[1, 2]", "cannot unmarshal array"),
        ("json(payload).a.b", "{}", "cannot fetch b from <nil>"),
        ("json(payload).n < 'x'", '{"n": 1}', "invalid operation: float64 < string"),
        ("payload + 1", "x", "invalid operation: string + int"),
        ("1 / 0", "", "integer divide by zero"),
        ("1.5 % 2", "", "invalid operation: float64 % int"),
        ("[1][3]", "", "index out of range"),
        ("1 && true", "", "is int, not bool"),
        ("not 1", "", "not bool"),
        ("sprig.upper(1)", "", "as type string"),
        ("nil in 'abc'", "", 'operator "in" not defined on string'),
    ],
)
def test_runtime_errors_raise_expr_error(expression, payload, message):
    with pytest.raises(ExprError, match="unable to evaluate expression") as info:
        evaluate(expression, payload)
    assert message in str(info.value)
    assert repr(expression) in str(info.value)


@pytest.mark.parametrize(
    ("expression", "position", "message"),
    [
        ("1 +", 3, "unexpected end of expression"),
        ("int(json(payload).id < 100", 26, "unexpected end of expression"),
        ("1 2", 2, "unexpected token 2"),
        ("'abc", 0, "literal not terminated"),
        ("a = 1", 2, "unexpected token '='"),
        ("@", 0, "unrecognized character"),
        ("1abc", 0, "bad number syntax"),
        ("'\\q'", 1, "invalid char escape"),
        ("nope(payload)", 0, "unknown function nope()"),
        ("sprig.nope(payload)", 6, "unknown function sprig.nope"),
        ("sprig.contains('a')", 6, "takes 2 argument(s), got 1"),
        ("int(1, 2)", 0, "takes 1 argument, got 2"),
        ("payload.upper()", 8, "only sprig.<function>"),
        ("all([1], {# > 0})", 0, "closure is not supported"),
        ("payload matches '('", 8, "error parsing regexp"),
        ("(" * 3000, 0, "nested too deeply"),
    ],
)
def test_syntax_errors_name_the_expression_and_position(expression, position, message):
    with pytest.raises(ValueError) as info:
        compile_expression(expression)
    error = info.value
    assert isinstance(error, ExprSyntaxError)
    assert error.position == position
    assert message in str(error)
    assert str(error).startswith(f"invalid expression {expression!r}: ")
    assert str(error).endswith(f"at position {position}")


def test_eval_bool_refuses_a_non_bool_and_eval_str_formats_like_go():
    with pytest.raises(ExprError, match="unable to cast expression result"):
        compile_expression("json(payload).a").eval_bool(payload_env(b'{"a": "b"}'))
    time = compile_expression("json(payload).t")
    assert time.eval_str(payload_env(b'{"t": "2024-01-01"}')) == "2024-01-01"
    assert time.eval_str(payload_env(b'{"t": 1662998400}')) == "1.6629984e+09"
    assert time.eval_str(payload_env(b"{}")) == "<nil>"


def test_an_expression_is_parsed_once_and_pickles_as_its_text():
    expression = compile_expression(FILTER_ID)
    copy = pickle.loads(pickle.dumps(expression))
    assert copy.text == FILTER_ID
    for payload, expected in [(b'{"id": 1}', True), (b'{"id": 101}', False)]:
        env = payload_env(payload)
        assert expression.eval_bool(env) is copy.eval_bool(env) is expected


def test_the_env_is_any_mapping_and_unknown_names_are_nil():
    expression = compile_expression("user.age >= 18 && name != nil")
    assert expression.eval_bool({"user": {"age": 20}, "name": "x"}) is True
    assert expression.eval_bool({"user": {"age": 20}}) is False
    assert payload_env(b"\xff") == {"payload": "\udcff"}  # bytes kept, as Go's string(msg)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (1.5, "1.5"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (1e21, "1e+21"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5e-7, "-2.5e-07"),
        (float("inf"), "+Inf"),
        (float("nan"), "NaN"),
        (7, "7"),
        (True, "true"),
        (None, "<nil>"),
        ("s", "s"),
        ([1, "a", None], "[1 a <nil>]"),
        ({"b": 2.0, "a": {"c": False}}, "map[a:map[c:false] b:2]"),
    ],
)
def test_go_format_is_fmt_percent_v(value, text):
    assert go_format(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_format_of_a_float_reads_back_as_the_same_float(x):
    assert float(go_format(x)) == x


@given(st.integers(-(2**62), 2**62), st.integers(-(2**62), 2**62).filter(bool))
def test_integer_arithmetic_is_go_int64(a, b):
    env = {"a": a, "b": b}
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    assert compile_expression("a / b").eval(env) == quotient
    assert compile_expression("a % b").eval(env) == a - b * quotient
    assert compile_expression("a + b - b").eval(env) == a


def test_go_atoi():
    assert [go_atoi(s) for s in ["0", "-12", "+3", "007", str(2**63 - 1)]] == [
        0,
        -12,
        3,
        7,
        2**63 - 1,
    ]
    for bad in ["", " 1", "1 ", "1.0", "1e3", "0x10", "١", str(2**63), "--1", "1_000"]:
        with pytest.raises(ValueError, match="strconv.Atoi"):
            go_atoi(bad)


# -- map builtins ----------------------------------------------------------------------


def test_cat_keeps_value_keys_and_times_and_drops_tags():
    cat = build_map_builtin("cat", ["ignored"], {})
    parent = datum(b"payload", tags=["from-upstream"])
    (out,) = cat(parent)
    assert (out.value, out.keys, out.tags) == (b"payload", ["k1", "k2"], [])
    assert (out.event_time, out.watermark, out.headers, out.id) == (T0, WM, {"h": "v"}, "msg-1")


def test_map_filter_passes_without_keys_and_drops_false_or_failing():
    keep = build_map_builtin("filter", [], {"expression": FILTER_ID})
    (out,) = keep(datum('{"id": 5}'))
    assert (out.value, out.keys, out.tags) == (b'{"id": 5}', [], [])
    assert (out.event_time, out.watermark, out.headers, out.id) == (T0, WM, {"h": "v"}, "msg-1")
    assert keep(datum('{"id": 500}')) == []
    assert keep(datum('{"id": "x"}')) == []  # error -> drop
    assert keep(datum("not json")) == []


def test_map_filter_with_the_go_example_expression():
    keep = build_map_builtin("filter", [], {"expression": f"{FILTER_ID} && {HELLO_GOOD}"})
    good = '{"id": 1, "msg": "hello", "desc": "good"}'
    assert [d.value for d in keep(datum(good))] == [good.encode()]
    assert keep(datum('{"id": 1, "msg": "hello", "desc": "bad"}')) == []


def test_builtins_take_plain_items_and_pickle():
    cat = pickle.loads(pickle.dumps(build_map_builtin("cat")))
    (out,) = cat(("key", b"value"))
    assert (out.keys, out.value) == (["key"], b"value")
    keep = pickle.loads(pickle.dumps(build_map_builtin("filter", kwargs={"expression": FILTER_ID})))
    assert len(keep(b'{"id": 1}')) == 1
    for name, kwargs in [
        ("filter", {"expression": "true"}),
        ("eventTimeExtractor", {"expression": "payload", "format": "2006"}),
        ("timeExtractionFilter", {"filterExpr": "true", "eventTimeExpr": "payload"}),
    ]:
        fn = pickle.loads(pickle.dumps(build_transformer_builtin(name, [], kwargs)))
        assert len(fn(datum("2020"))) == 1


def test_unknown_builtins_and_missing_kwargs_fail_as_numaflow_did():
    with pytest.raises(ValueError, match='^unrecognized function "nope"$'):
        build_map_builtin("nope", [], {})
    with pytest.raises(ValueError, match='^unrecognized transformer "cat"$'):
        build_transformer_builtin("cat", [], {})
    with pytest.raises(ValueError, match='^missing "expression"$'):
        build_map_builtin("filter", [], {})
    for name in ("filter", "eventTimeExtractor"):
        with pytest.raises(ValueError, match='^missing "expression"$'):
            build_transformer_builtin(name, [], {"format": "2006"})
    with pytest.raises(ValueError, match='^missing "filterExpr"$'):
        build_transformer_builtin("timeExtractionFilter", [], {"eventTimeExpr": "payload"})
    with pytest.raises(ValueError, match='^missing "eventTimeExpr"$'):
        build_transformer_builtin("timeExtractionFilter", [], {"filterExpr": "true"})
    with pytest.raises(ValueError, match="invalid expression"):  # at start, not per message
        build_map_builtin("filter", [], {"expression": "int(json(payload).id <"})
    with pytest.raises(ValueError, match='kwarg "expression" must be a string'):
        build_map_builtin("filter", [], {"expression": 1})
    assert sorted(MAP_BUILTINS) == ["cat", "filter"]
    assert sorted(TRANSFORMER_BUILTINS) == ["eventTimeExtractor", "filter", "timeExtractionFilter"]


# -- transformer builtins --------------------------------------------------------------


def test_transformer_filter_keeps_keys():
    keep = build_transformer_builtin("filter", [], {"expression": FILTER_ID})
    (out,) = keep(datum('{"id": 5}'))
    assert (out.keys, out.event_time, out.headers) == (["k1", "k2"], T0, {"h": "v"})
    assert keep(datum('{"id": 500}')) == keep(datum('{"id": "x"}')) == []


ITEMS = (
    '{"test": 21, "item": [{"id": 1, "name": "numa", "time": "2022-02-18T21:54:42.123Z"},'
    '{"id": 2, "name": "numa", "time": "%s"}]}'
)


@pytest.mark.parametrize(
    ("time", "layout", "expected"),
    [
        ("2021-02-18T21:54:42.123Z", None, datetime(2021, 2, 18, 21, 54, 42, 123000, UTC)),
        (
            "2021-02-18T21:54:42.123Z",
            "2006-01-02T15:04:05Z07:00",
            datetime(2021, 2, 18, 21, 54, 42, 123000, UTC),
        ),  # noqa: E501
        ("1673239888", None, datetime(2023, 1, 9, 4, 51, 28, tzinfo=UTC)),
        ("1673239888123", None, datetime(2023, 1, 9, 4, 51, 28, 123000, tzinfo=UTC)),
        ("2021-02-18 21:54:42 +0100", None, datetime(2021, 2, 18, 20, 54, 42, tzinfo=UTC)),
        ("18/02/2021 21:54", "02/01/2006 15:04", datetime(2021, 2, 18, 21, 54, tzinfo=UTC)),
        ("2021-02-18T21:54:42.123Z", "Mon Jan _2 15:04:05 2006", None),  # ANSIC: no match
        ("02/18/2021", None, None),  # ambiguous for ParseStrict
        ("not a time", None, None),
    ],
)
def test_event_time_extractor(time, layout, expected):
    kwargs = {"expression": "json(payload).item[1].time"}
    if layout:
        kwargs["format"] = layout
    extract = build_transformer_builtin("eventTimeExtractor", [], kwargs)
    payload = ITEMS % time
    (out,) = extract(datum(payload))
    assert out.event_time == (T0 if expected is None else expected)
    assert (out.value, out.keys, out.watermark, out.headers) == (
        payload.encode(),
        ["k1", "k2"],
        WM,
        {"h": "v"},
    )


def test_event_time_extractor_keeps_the_event_time_when_the_expression_fails():
    extract = build_transformer_builtin(
        "eventTimeExtractor", [], {"expression": "json(payload).a.b"}
    )
    (out,) = extract(datum("{}"))
    assert out.event_time == T0 and out.keys == ["k1", "k2"]


def test_time_extraction_filter_filters_first_then_extracts():
    fn = build_transformer_builtin(
        "timeExtractionFilter",
        [],
        {
            "filterExpr": "json(payload).keep == true",
            "eventTimeExpr": "json(payload).at",
            "eventTimeFormat": "2006-01-02 15:04",
        },
    )
    (out,) = fn(datum('{"keep": true, "at": "2024-05-06 07:08"}'))
    assert out.event_time == datetime(2024, 5, 6, 7, 8, tzinfo=UTC)
    assert out.keys == ["k1", "k2"]
    (kept,) = fn(datum('{"keep": true, "at": "soon"}'))
    assert kept.event_time == T0
    assert fn(datum('{"keep": false, "at": "2024-05-06 07:08"}')) == []
    assert fn(datum("not json")) == []


@pytest.mark.parametrize(
    ("layout", "value", "expected"),
    [
        (
            "2006-01-02T15:04:05Z07:00",
            "2024-03-04T05:06:07Z",
            datetime(2024, 3, 4, 5, 6, 7, tzinfo=UTC),
        ),  # noqa: E501
        (
            "2006-01-02T15:04:05Z07:00",
            "2024-03-04T05:06:07.5-02:00",
            datetime(2024, 3, 4, 7, 6, 7, 500000, tzinfo=UTC),
        ),  # noqa: E501
        (
            "2006-01-02 15:04:05.000",
            "2024-03-04 05:06:07.123",
            datetime(2024, 3, 4, 5, 6, 7, 123000, tzinfo=UTC),
        ),  # noqa: E501
        (
            "Mon, 02 Jan 2006 15:04:05 MST",
            "Tue, 05 Mar 2024 01:02:03 PST",
            datetime(2024, 3, 5, 1, 2, 3, tzinfo=UTC),
        ),  # noqa: E501
        ("Jan _2 06 3:04PM", "Mar  5 24 1:02PM", datetime(2024, 3, 5, 13, 2, tzinfo=UTC)),
        ("January 2, 2006", "march 5, 1999", datetime(1999, 3, 5, tzinfo=UTC)),
        ("20060102150405", "20240305010203", datetime(2024, 3, 5, 1, 2, 3, tzinfo=UTC)),
        ("2006.002", "2024.366", datetime(2024, 12, 31, tzinfo=UTC)),
        ("2006-01-02 -0700", "2024-03-05 +0530", datetime(2024, 3, 4, 18, 30, tzinfo=UTC)),
    ],
)
def test_go_layouts(layout, value, expected):
    assert parse_go_time(layout, value) == expected
    assert parse_event_time(value, layout) == expected


@pytest.mark.parametrize(
    ("layout", "value"),
    [
        ("2006-01-02", "2024-02-30"),  # day out of range
        ("2006-01-02", "2024-13-01"),  # month out of range
        ("2006-01-02", "2024-1-02"),  # 01 needs two digits
        ("2006-01-02", "2024-01-02x"),  # extra text
        ("15:04", "10:30"),  # year 0 cannot be represented
        ("2006-01-02 15:04", "2024-01-02 24:00"),
        ("2006-01-02T15:04:05Z07:00", "2024-01-02T03:04:05+0100"),
    ],
)
def test_go_layout_errors(layout, value):
    with pytest.raises(ValueError, match="parsing time"):
        parse_go_time(layout, value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1332151919", datetime(2012, 3, 19, 10, 11, 59, tzinfo=UTC)),
        ("1332151919000", datetime(2012, 3, 19, 10, 11, 59, tzinfo=UTC)),
        ("1332151919000001", datetime(2012, 3, 19, 10, 11, 59, 1, tzinfo=UTC)),
        ("1332151919000001999", datetime(2012, 3, 19, 10, 11, 59, 1, tzinfo=UTC)),
        ("20140722105203", datetime(2014, 7, 22, 10, 52, 3, tzinfo=UTC)),
        ("20140601", datetime(2014, 6, 1, tzinfo=UTC)),
        ("2014", datetime(2014, 1, 1, tzinfo=UTC)),
        ("2009-08-12T22:15:09-07:00", datetime(2009, 8, 13, 5, 15, 9, tzinfo=UTC)),
        ("2009-08-12T22:15:09.988", datetime(2009, 8, 12, 22, 15, 9, 988000, tzinfo=UTC)),
        ("2014-04-26 05:24:37 PM", datetime(2014, 4, 26, 17, 24, 37, tzinfo=UTC)),
        ("2012-08-03 18:31:59.257000000 +0000 UTC", datetime(2012, 8, 3, 18, 31, 59, 257000, UTC)),
        ("2014-04", datetime(2014, 4, 1, tzinfo=UTC)),
        ("2014/04/08 22:05", datetime(2014, 4, 8, 22, 5, tzinfo=UTC)),
        ("Mon Jan  2 15:04:05 2006", datetime(2006, 1, 2, 15, 4, 5, tzinfo=UTC)),
        ("Mon, 02 Jan 2006 15:04:05 -0700", datetime(2006, 1, 2, 22, 4, 5, tzinfo=UTC)),
        ("May 8, 2009 5:57:51 PM", datetime(2009, 5, 8, 17, 57, 51, tzinfo=UTC)),
        ("12 Feb 2006, 19:17", datetime(2006, 2, 12, 19, 17, tzinfo=UTC)),
        ("06/Jan/2008:15:04:05 -0700", datetime(2008, 1, 6, 22, 4, 5, tzinfo=UTC)),
    ],
)
def test_dateparse_strict_formats(text, expected):
    assert parse_date_strict(text) == expected


@pytest.mark.parametrize("text", ["03/31/2014", "3.31.2014", "08/21/71", "13-Feb-03"])
def test_dateparse_strict_refuses_ambiguous_dates(text):
    with pytest.raises(ValueError, match="ambiguous"):
        parse_date_strict(text)


@pytest.mark.parametrize("text", ["", "123", "12345", "hello", "2014-02-30", "Foo 3, 2020"])
def test_dateparse_strict_refuses_other_strings(text):
    with pytest.raises(ValueError):
        parse_date_strict(text)


# -- image mapping ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("quay.io/numaio/numaflow-go/map-cat:stable", ("cat", {})),
        ("quay.io/numaio/numaflow-go/map-forward-message:stable", ("cat", {})),
        ("quay.io/numaio/numaflow-rs/map-cat:stable", ("cat", {})),
        ("map-cat", ("cat", {})),
        ("registry:5000/x/map-cat@sha256:abc", ("cat", {})),
        ("quay.io/numaio/numaflow-go/map-filter-id:stable", ("filter", {"expression": FILTER_ID})),
        ("quay.io/numaio/numaflow-go/map-even-odd:stable", None),
        ("quay.io/numaio/numaflow-go/reduce-sum:stable", None),
        ("my-pipeline/my-udf:v0.1", None),
    ],
)
def test_builtin_for_image(image, expected):
    assert builtin_for_image(image) == expected


def test_image_mapping_returns_fresh_kwargs():
    name, kwargs = builtin_for_image("x/map-filter-id:1")
    kwargs["expression"] = "false"
    assert IMAGE_BUILTINS["map-filter-id"][1]["expression"] == FILTER_ID
    name, kwargs = builtin_for_image("x/map-filter-id")
    assert len(build_map_builtin(name, [], kwargs)(datum('{"id": 1}'))) == 1


# -- sourcetransformer: types, servers, TransformRunner -------------------------------

# pynumaflow's event_time_filter example (docs/user-guide/sources/transformer), with
# ``pynumaflow`` renamed to ``flowspark``.
EVENT_TIME_FILTER = """
import datetime
import logging
from flowspark.sourcetransformer import Messages, Message, Datum, SourceTransformServer

january_first_2022 = datetime.datetime.fromtimestamp(1640995200)
january_first_2023 = datetime.datetime.fromtimestamp(1672531200)


def my_handler(keys: list[str], datum: Datum) -> Messages:
    val = datum.value
    event_time = datum.event_time
    messages = Messages()

    if event_time < january_first_2022:
        logging.info("Got event time:%s, it is before 2022, so dropping", event_time)
        messages.append(Message.to_drop(event_time))
    elif event_time < january_first_2023:
        logging.info("Got event time:%s, it is within year 2022", event_time)
        messages.append(
            Message(value=val, event_time=january_first_2022, tags=["within_year_2022"])
        )
    else:
        logging.info("Got event time:%s, it is after year 2022", event_time)
        messages.append(
            Message(value=val, event_time=january_first_2023, tags=["after_year_2022"])
        )

    return messages


if __name__ == "__main__":
    grpc_server = SourceTransformServer(my_handler)
    grpc_server.start()
"""


def stamp_2020(keys: list[str], datum: TransformDatum) -> Messages:
    return Messages(Message(datum.value, datetime(2020, 1, 1), keys=keys))


class Upper(SourceTransformer):
    def handler(self, keys: list[str], datum: TransformDatum) -> Messages:
        return Messages(
            Message(datum.value.upper(), datum.event_time + timedelta(seconds=1), keys=["U"]),
            Message(datum.value, datum.event_time, keys=keys, tags=["copy"]),
        )


async def async_stamp(keys: list[str], datum: TransformDatum) -> Messages:
    await asyncio.sleep(0)
    return Messages(Message(datum.value, datetime(2020, 1, 1, tzinfo=UTC), keys=keys))


def test_pynumaflows_example_runs_unchanged_but_for_the_prefix():
    namespace: dict[str, Any] = {"__name__": "__main__"}
    with capturing_servers() as started:
        exec(compile(EVENT_TIME_FILTER, "event_time_filter.py", "exec"), namespace)
    (server,) = started
    assert isinstance(server, SourceTransformServer)
    run = TransformRunner(server)
    in_2022 = as_utc(namespace["january_first_2022"], "t")
    in_2023 = as_utc(namespace["january_first_2023"], "t")
    assert run(datum(b"v", event_time=in_2022 - timedelta(days=1))) == []  # to_drop
    (within,) = run(datum(b"v", event_time=in_2022 + timedelta(days=1)))
    assert (within.value, within.tags, within.keys, within.event_time) == (
        b"v",
        ["within_year_2022"],
        [],
        in_2022,
    )
    (after,) = run(datum(b"v", event_time=in_2023 + timedelta(days=1)))
    assert (after.tags, after.event_time) == (["after_year_2022"], in_2023)
    assert (after.watermark, after.headers, after.id) == (WM, {"h": "v"}, "msg-1")


def test_transform_runner_with_a_class_handler_and_several_messages():
    run = TransformRunner(Upper())
    upper, copy = run(datum(b"abc"))
    assert (upper.value, upper.keys, upper.tags) == (b"ABC", ["U"], [])
    assert upper.event_time == T0 + timedelta(seconds=1)
    assert (copy.value, copy.keys, copy.tags, copy.event_time) == (
        b"abc",
        ["k1", "k2"],
        ["copy"],
        T0,
    )


def test_transform_runner_with_an_async_function_and_a_server():
    for handler in (async_stamp, SourceTransformAsyncServer(async_stamp)):
        (out,) = TransformRunner(handler)(datum(b"x"))
        assert out.event_time == datetime(2020, 1, 1, tzinfo=UTC)
        assert out.keys == ["k1", "k2"]


def test_transform_runner_runs_async_handlers_inside_a_running_loop():
    async def main() -> list[Datum]:
        return TransformRunner(async_stamp)(datum(b"x"))

    (out,) = asyncio.run(main())
    assert out.value == b"x"


def test_transform_runner_sees_the_datum_as_pynumaflow_does():
    seen: list[Any] = []

    def spy(keys, d):
        seen.append((keys, d))
        return Messages(Message.to_drop(d.event_time))

    assert TransformRunner(spy)(datum(b"v", headers={"a": "1"})) == []
    ((keys, d),) = seen
    assert isinstance(d, TransformDatum)
    assert (keys, d.keys, d.value, d.event_time, d.watermark) == (
        ["k1", "k2"],
        ["k1", "k2"],
        b"v",
        T0,
        WM,
    )
    assert d.headers == {"a": "1"} and d.user_metadata is None and d.system_metadata is None


def test_transform_runner_pickles():
    run = pickle.loads(pickle.dumps(TransformRunner(Upper())))
    assert len(run(datum(b"a"))) == 2
    run = pickle.loads(pickle.dumps(TransformRunner(SourceTransformServer(stamp_2020))))
    assert run(datum(b"a"))[0].event_time == datetime(2020, 1, 1, tzinfo=UTC)


def test_transform_runner_accepts_pynumaflows_own_classes():
    from pynumaflow import sourcetransformer as pnf

    class PyUpper(pnf.SourceTransformer):
        def handler(self, keys, datum):
            return pnf.Messages(pnf.Message(datum.value.upper(), datum.event_time, keys=keys))

    (out,) = TransformRunner(PyUpper())(datum(b"a"))
    assert (out.value, out.keys, out.event_time) == (b"A", ["k1", "k2"], T0)


def test_transform_runner_errors():
    with pytest.raises(TypeError, match="not the class"):
        TransformRunner(Upper)
    with pytest.raises(TypeError, match="expected a function or a SourceTransformer"):
        SourceTransformServer(42)
    with pytest.raises(TypeError, match="returned None"):
        TransformRunner(lambda keys, d: None)(datum(b"a"))
    with pytest.raises(TypeError, match="must return sourcetransformer.Message"):
        TransformRunner(lambda keys, d: [b"raw"])(datum(b"a"))
    with pytest.raises(ZeroDivisionError):
        TransformRunner(lambda keys, d: 1 / 0)(datum(b"a"))


def test_message_types_follow_pynumaflow():
    naive = datetime(2022, 1, 1)
    message = Message(b"v", naive, keys=["k"], tags=["t"])
    assert message.event_time == datetime(2022, 1, 1, tzinfo=UTC)
    assert message.event_time.tzinfo is UTC and message.user_metadata is None
    assert message == Message(b"v", naive, ["k"], ["t"])
    assert Message(b"v", None).event_time == datetime(1, 1, 1, tzinfo=UTC)
    dropped = Message.to_drop(naive)
    assert (dropped.value, dropped.keys, dropped.tags) == (b"", [], [DROP])
    with pytest.raises(TypeError, match="Message 'value' must be bytes"):
        Message("text", naive)
    with pytest.raises(TypeError, match="Wrong data type"):
        TransformDatum(["k"], b"v", "now", naive)
    d = TransformDatum(["k"], b"v", naive, naive, headers={"h": "1"}, user_metadata="u")
    assert d.user_metadata == "u" and d.headers == {"h": "1"}
    assert pickle.loads(pickle.dumps(d)) == d


def test_the_face_matches_pynumaflows_names_and_signatures():
    import pynumaflow.sourcetransformer as pnf

    import flowspark.sourcetransformer as face

    assert set(pnf.__all__) - set(face.__all__) == {"UserMetadata", "SystemMetadata"}
    for name in ("Message", "Datum"):
        mine = list(inspect.signature(getattr(face, name)).parameters)
        theirs = list(inspect.signature(getattr(pnf, name)).parameters)
        assert mine == theirs, name
    for name in (
        "SourceTransformServer",
        "SourceTransformAsyncServer",
        "SourceTransformMultiProcServer",
    ):
        server, their_server = getattr(face, name), getattr(pnf, name)
        assert parameter_names(server) == list(inspect.signature(their_server).parameters)
        assert server_settings(server(stamp_2020)) == server_settings(their_server(stamp_2020))
    assert face.DROP == pnf.DROP


def test_servers_validate_record_and_capture():
    server = SourceTransformMultiProcServer(stamp_2020, server_count=2, max_threads=99)
    assert (server.udf_kind, server.handler, server.source_transform_instance) == (
        "sourcetransform",
        stamp_2020,
        stamp_2020,
    )
    assert server.sock_path == "unix:///var/run/numaflow/sourcetransform.sock"
    assert server.max_threads == 16 and server._process_count == 2
    with capturing_servers() as started:
        server.start()
    assert started == [server]


def test_start_transforms_stdin_lines(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO('{"value": "a", "event_time": 0}\n\nplain\n'))
    SourceTransformServer(Upper()).start()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert '"value": "A"' in lines[0] and '"keys": ["U"]' in lines[0]
    assert '"event_time": "1970-01-01T00:00:01+00:00"' in lines[0]
    assert '"value": "PLAIN"' in lines[2]


# -- pynumaflow's root names -----------------------------------------------------------


def test_setup_logging_like_pynumaflow(capsys):
    import pynumaflow

    assert {"setup_logging", "StdoutFilter"} <= set(dir(flowspark))
    root_names = {
        name
        for name, value in vars(pynumaflow).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert root_names == {"setup_logging", "StdoutFilter"}
    logger = flowspark.setup_logging("flowspark.test.setup_logging")
    assert isinstance(logger, logging.Logger)
    assert logger is logging.getLogger("flowspark.test.setup_logging")
    stdout_handler, stderr_handler = logger.handlers[-2:]
    assert stdout_handler.level == logging.INFO and stderr_handler.level == logging.ERROR
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.info("to stdout")
    logger.error("to stderr")
    captured = capsys.readouterr()
    assert "INFO     to stdout" in captured.out and "to stderr" not in captured.out
    assert "ERROR    to stderr" in captured.err
    record = logging.LogRecord("x", logging.WARNING, "f", 1, "m", None, None)
    assert flowspark.StdoutFilter().filter(record)
    record.levelno = logging.ERROR
    assert not flowspark.StdoutFilter().filter(record)


# -- the example handlers for Numaflow's example images ---------------------------------


def example(name: str) -> dict[str, Any]:
    return runpy.run_path(str(EXAMPLES / f"{name}.py"))


class Collector:
    def __init__(self) -> None:
        self.items: list[Any] = []

    async def put(self, item: Any) -> None:
        self.items.append(item)


async def aiter_of(items: list[Any]):
    for item in items:
        yield item


def map_datum(value: bytes, keys: list[str] | None = None):
    from flowspark.mapper import Datum as MapDatum

    return MapDatum(keys or ["in"], value, T0, WM)


@pytest.mark.parametrize(
    ("value", "keys", "tags"),
    [
        (b"2", ["even"], ["even-tag"]),
        (b"-4", ["even"], ["even-tag"]),
        (b"+7", ["odd"], ["odd-tag"]),
        (b"0", ["even"], ["even-tag"]),
        (b"x", None, None),
        (b"1.0", None, None),
        (b" 3", None, None),
        (b"", None, None),
        (b"9223372036854775808", None, None),  # beyond int64: Atoi fails
    ],
)
def test_even_odd_example(value, keys, tags):
    handler = example("even_odd")["my_handler"]
    (message,) = handler(["in"], map_datum(value))
    if keys is None:
        assert message.tags == [DROP]
    else:
        assert (message.value, message.keys, message.tags) == (value, keys, tags)


def test_even_odd_example_runs_as_a_map_step():
    with capturing_servers() as started:
        runpy.run_path(str(EXAMPLES / "even_odd.py"), run_name="__main__")
    handler = handler_factory(started[0], "map")()
    datums = [map_datum(v) for v in [b"1", b"x", b"2"]]
    out = run_map_stream("even-odd", handler, datums, 4, lambda d: d.keys, lambda m, d, i: m)
    assert [(m.value, m.keys, m.tags) for m in out] == [
        (b"1", ["odd"], ["odd-tag"]),
        (b"", [], [DROP]),
        (b"2", ["even"], ["even-tag"]),
    ]


def test_retry_example(capsys):
    handler = example("retry")["my_handler"]
    results = [handler(["k"], map_datum(v))[0] for v in [b"a", b"b", b"a", b"a"]]
    assert [(m.value, m.keys, m.tags) for m in results] == [
        (b"a", [], ["retry"]),
        (b"b", [], ["retry"]),
        (b"a", [], ["retry"]),
        (b"a", [], []),
    ]
    assert capsys.readouterr().out.splitlines()[-1] == 'count for "a"=3'
    again = handler(["k"], map_datum(b"a"))[0]
    assert again.tags == ["retry"]  # the count was forgotten at 3


def test_reduce_sum_example():
    reduce_sum = example("reduce_sum")["ReduceSum"]
    datums = [map_datum(v, ["k"]) for v in [b"1", b"2", b"x", b"-10", b"40"]]
    messages = asyncio.run(reduce_sum().handler(["k"], aiter_of(datums), None))
    assert [(m.value, m.keys) for m in messages] == [(b"33", ["k"])]
    empty = asyncio.run(reduce_sum().handler(["k"], aiter_of([]), None))
    assert [m.value for m in empty] == [b"0"]


def test_reduce_stream_sum_example():
    reduce_stream_sum = example("reduce_stream_sum")["ReduceStreamSum"]
    values = [b"60", b"50", b"oops", b"99", b"1", b"5"]
    output = Collector()
    datums = aiter_of([map_datum(v, ["k"]) for v in values])
    asyncio.run(reduce_stream_sum().handler(["k"], datums, output, None))
    assert [(m.value, m.keys) for m in output.items] == [
        (b"110", ["k"]),
        (b"100", ["k"]),
        (b"5", ["k"]),
    ]
    output = Collector()
    asyncio.run(reduce_stream_sum().handler(["k"], aiter_of([]), output, None))
    assert [m.value for m in output.items] == [b"0"]


def test_stream_sorter_example():
    from flowspark.accumulator import Datum as AccDatum

    stream_sorter = example("stream_sorter")["StreamSorter"]

    def acc(event_s: int, wm_s: int) -> AccDatum:
        return AccDatum(
            ["k"],
            str(event_s).encode(),
            datetime.fromtimestamp(event_s, UTC),
            datetime.fromtimestamp(wm_s, UTC),
            f"id-{event_s}",
            headers={"h": str(event_s)},
        )

    inputs = [acc(5, 0), acc(3, 0), acc(4, 0), acc(9, 4), acc(6, 4), acc(7, 6), acc(8, 6)]
    output = Collector()
    asyncio.run(stream_sorter().handler(aiter_of(inputs), output))
    # wm 0 first (> UnixMilli(-1)): nothing <= 0. wm 4: 3, 4. wm 6: 5, 6. 7, 8, 9 stay kept.
    assert [m.value for m in output.items] == [b"3", b"4", b"5", b"6"]
    first = output.items[0]
    assert (first.keys, first.id, first.headers) == (["k"], "id-3", {"h": "3"})
    assert first.event_time == datetime.fromtimestamp(3, UTC)
    assert first.watermark == datetime.fromtimestamp(0, UTC)


@pytest.mark.parametrize(
    ("name", "server"),
    [
        ("even_odd", "MapServer"),
        ("retry", "MapServer"),
        ("reduce_sum", "ReduceAsyncServer"),
        ("reduce_stream_sum", "ReduceStreamAsyncServer"),
        ("stream_sorter", "AccumulatorAsyncServer"),
    ],
)
def test_example_scripts_start_their_server(name, server):
    with capturing_servers() as started:
        runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
    assert [type(s).__name__ for s in started] == [server]
