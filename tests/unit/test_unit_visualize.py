"""``python -m flowspark.visualize``: a flow as Mermaid, SVG or HTML, without Spark."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowspark.connectors.stdio import StdOutput
from flowspark.dataflow import Dataflow
from flowspark.engine.observe import STEP_COUNTS, BatchProgress, batch_figures
from flowspark.testing import TestingInput, TestingOutput
from flowspark.visualize import (
    Figures,
    flow_graph,
    main,
    read_progress,
    to_html,
    to_mermaid,
    to_svg,
)
from flowspark.visualize.graph import safe_ids
from flowspark.window import EventClockConfig, TumblingWindow
from tests import bytewax_pages
from tests.no_pyspark import BLOCK_PYSPARK

REPO = Path(__file__).resolve().parents[2]
SVG_NS = "{http://www.w3.org/2000/svg}"
ARROW = re.compile(r"^\s+(s_\w+) (-->|==>|-\.->)(?:\|\"([^\"]*)\"\|)? (s_\w+)$")
NODE = re.compile(r"^\s+(s_\w+)[\[\(\{/]+\"(.*)\"[\]\)\}/]+$")
ENTITIES = {"#quot;": '"', "#lt;": "<", "#gt;": ">", "#amp;": "&", "#35;": "#"}


# -- the seed page's example flows (bytewax 0.17's Dataflow page), built with flowspark --


def flat_map_example() -> Dataflow:
    flow = Dataflow()
    flow.input("inp", TestingInput(["hello world"]))

    def split_into_words(sentence):
        return sentence.split()

    flow.flat_map(split_into_words)
    flow.output("out", StdOutput())
    return flow


def sessionizer_example() -> Dataflow:
    return bytewax_pages.sessionizer_example([{"user": "a", "type": "login"}], StdOutput())


def reduce_window_example() -> Dataflow:
    align_to = datetime(2022, 1, 1, tzinfo=UTC)
    inp = [("b", {"time": align_to, "val": 1})]
    return bytewax_pages.reduce_window_example(inp, TestingOutput([]), align_to)


def wordcount_example() -> Dataflow:
    """The classic word count: lines -> words -> (word, 1) -> counts per 5 s window."""
    align_to = datetime(2022, 1, 1, tzinfo=UTC)
    flow = Dataflow("wordcount")
    lines = flow.input("lines", TestingInput(["a b", "b"]))
    words = lines.flat_map("tokenize", str.split).map("initial_count", lambda w: (w, 1))
    counts = words.reduce_window(
        "sum",
        EventClockConfig(lambda _: align_to, wait_for_system_duration=timedelta(0)),
        TumblingWindow(length=timedelta(seconds=5), align_to=align_to),
        lambda a, b: a + b,
    )
    counts.output("out", StdOutput())
    return flow


EXAMPLES = {
    "flat_map": flat_map_example,
    "reduce (sessionizer)": sessionizer_example,
    "reduce_window (count)": reduce_window_example,
    "wordcount": wordcount_example,
}


def step_edges(flow: Dataflow) -> set[tuple[str, str]]:
    return {(p.step.step_id, s.step_id) for s in flow.steps for p in s.upstreams}


def parse_mermaid(text: str) -> tuple[dict[str, list[str]], list[tuple[str, str, str, str]]]:
    """Node id -> label lines (entities decoded), and (source, arrow, label, target) edges."""
    nodes: dict[str, list[str]] = {}
    edges = []
    for line in text.splitlines():
        if match := ARROW.match(line):
            source, arrow, label, target = match.groups()
            edges.append((source, arrow, label or "", target))
        elif match := NODE.match(line):
            label = match.group(2)
            for entity, char in ENTITIES.items():
                label = label.replace(entity, char)
            nodes[match.group(1)] = label.split("<br/>")
    return nodes, edges


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_seed_pages_examples_name_every_step_and_every_edge(name):
    flow = EXAMPLES[name]()
    nodes, edges = parse_mermaid(to_mermaid(flow))
    step_of = {node_id: lines[0] for node_id, lines in nodes.items()}
    assert sorted(step_of.values()) == sorted(s.step_id for s in flow.steps)
    drawn = {(step_of[source], step_of[target]) for source, _, _, target in edges}
    assert drawn == step_edges(flow)
    assert len(edges) == len(step_edges(flow))


def test_kinds_and_connectors_are_in_the_labels():
    nodes, _ = parse_mermaid(to_mermaid(wordcount_example()))
    labels = {lines[0]: " ".join(lines[1:]) for lines in nodes.values()}
    assert labels["lines"] == "input · TestingInput"
    assert labels["tokenize"] == "flat_map · str.split"
    assert labels["initial_count"] == "map"  # a lambda has no name to show
    assert labels["sum"] == "reduce_window · TumblingWindow 5s"
    assert labels["out"] == "output · StdOutput"


def test_a_keyed_exchange_is_drawn_thick_and_labelled_by_key():
    flow = reduce_window_example()
    text = to_mermaid(flow)
    _, edges = parse_mermaid(text)
    keyed = [(s, label, t) for s, arrow, label, t in edges if arrow == "==>"]
    assert keyed == [("s_inp", "by key", "s_count")]
    assert all(arrow == "-->" for s, arrow, _, t in edges if t != "s_count")
    assert "linkStyle 0 stroke:#c2570c,stroke-width:3px" in text  # the first edge
    svg = ET.fromstring(to_svg(flow))
    classes = [e.get("class") for e in svg.iter(f"{SVG_NS}polyline")]
    assert classes == ["edge keyed", "edge plain", "edge plain"]


def branch_merge_flow() -> Dataflow:
    flow = Dataflow("branchy")
    nums = flow.input("nums", TestingInput(range(6)))
    evens, odds = nums.branch("is even", lambda x: x % 2 == 0)
    tens = evens.map("times ten", lambda x: x * 10)
    merged = tens.merge(odds, step_id="together")
    merged.redistribute("spread").map("pair", lambda x: (str(x % 2), x)).stateful_map(
        "running", lambda: 0, lambda s, v: (s + v, s + v)
    ).output("out", TestingOutput([]))
    return flow


def test_a_branch_and_a_merge():
    flow = branch_merge_flow()
    nodes, edges = parse_mermaid(to_mermaid(flow))
    step_of = {node_id: lines[0] for node_id, lines in nodes.items()}
    named = {(step_of[s], label, step_of[t]): arrow for s, arrow, label, t in edges}
    assert named == {
        ("nums", "", "is even"): "-->",
        ("is even", "true", "times ten"): "-->",
        ("is even", "false", "together"): "-->",
        ("times ten", "", "together"): "-->",
        ("together", "", "spread"): "-->",
        ("spread", "round robin", "pair"): "-.->",
        ("pair", "by key", "running"): "==>",
        ("running", "", "out"): "-->",
    }
    graph = flow_graph(flow)
    stages = {n.step_id: n.stage for n in graph.nodes}
    assert stages == {
        "nums": 0,
        "is even": 0,
        "times ten": 0,
        "together": 0,
        "spread": 0,
        "pair": 1,
        "running": 2,
        "out": 2,
    }


def test_a_windows_late_stream_is_its_own_dashed_edge():
    flow = Dataflow()
    s = flow.input("inp", TestingInput([]))
    align_to = datetime(2022, 1, 1, tzinfo=UTC)
    window = s.collect_window(
        "w",
        EventClockConfig(lambda e: align_to, wait_for_system_duration=timedelta(0)),
        TumblingWindow(length=timedelta(minutes=1), align_to=align_to),
    )
    window.output("ok", TestingOutput([]))
    window.late.output("late", TestingOutput([]))
    _, edges = parse_mermaid(to_mermaid(flow))
    assert ("s_w", "-.->", "late", "s_late") in edges
    assert ("s_w", "-->", "", "s_ok") in edges


def test_awkward_step_ids_get_safe_node_ids_and_escaped_labels():
    flow = Dataflow('a "flow"')
    names = ['in.put "1"', "end", "x<y> & #z", "x_y___z", "tab\there", "pipe|`tick`"]
    s = flow.input(names[0], TestingInput([]))
    for name in names[1:-1]:
        s = s.map(name, str)
    s.output(names[-1], TestingOutput([]))
    text = to_mermaid(flow)
    nodes, edges = parse_mermaid(text)
    assert all(re.fullmatch(r"s_\w+", node_id) for node_id in nodes)
    assert len(set(nodes)) == len(names)
    shown = [lines[0] for lines in nodes.values()]
    assert shown[0] == 'in.put "1"' and shown[2] == "x<y> & #z" and shown[4] == "tab here"
    assert len(edges) == len(names) - 1
    for line in text.splitlines()[4:]:  # below the title: no raw quote inside a label
        if NODE.match(line):
            inner = NODE.match(line).group(2)
            assert '"' not in inner and "<" not in inner.replace("<br/>", "")
    assert text.splitlines()[1] == 'title: "a \\"flow\\""'
    ET.fromstring(to_svg(flow))  # still well-formed XML


def test_safe_ids_are_unique_even_when_names_collide():
    ids = safe_ids(["a.b", "a_b", "a b", "a_b_2"])
    assert len(set(ids)) == 4 and all(re.fullmatch(r"s_\w+", i) for i in ids)


# -- a run's figures --------------------------------------------------------------------

PROGRESS = [
    {
        "batch": 0,
        "steps": {"poem": {"out": 600}, "split": {"in": 600, "out": 590}},
        "duration_ms": 1200,
    },
    {
        "batch": 1,
        "steps": {"poem": {"out": 400}, "split": {"in": 400, "out": 390, "late": 2}},
        "duration_ms": 300,
        "watermark_lag_ms": 50,
    },
    {"batch": 2, "steps": {"split": {"in_per_s": 3.5}}, "state_keys": 7},
]


def test_progress_lines_are_summed_and_state_keys_are_the_last():
    figures = read_progress(json.dumps(line) for line in PROGRESS)
    assert figures.steps["poem"] == {"out": 1000}
    assert figures.steps["split"] == {"in": 1000, "out": 980, "late": 2}
    assert (figures.batches, figures.duration_ms, figures.watermark_lag_ms) == (3, 1500.0, 50.0)
    assert figures.state_keys == 7
    assert figures.label("split") == "in 1,000 · out 980 · late 2"
    assert figures.label("nowhere") == ""


def test_lines_are_read_as_the_engine_writes_them():
    progress = BatchProgress(4, True, 90, {"inp": 10}, {"out": 3}, {"w": 1}, state_keys=12)
    line = {"batchId": 4, **batch_figures(progress, wall_ms=0, seconds=1.0)}  # the env log's
    figures = read_progress([json.dumps(line), "", json.dumps(line)])
    assert figures.steps == {"inp": {"out": 20}, "out": {"in": 6}, "w": {"late": 2}}
    assert figures.state_keys == 12 and figures.batches == 2 and figures.duration_ms == 180
    assert {key for _, key in STEP_COUNTS} == {"in", "out", "late"}


@pytest.mark.parametrize(
    "bad, message",
    [
        ("{not json", "line 2: not JSON"),
        ("[1, 2]", "line 2: expected a JSON object; got list"),
        ('{"steps": {"a": {"in": "ten"}}}', "line 2: 'a' in: expected a number"),
    ],
)
def test_a_bad_progress_line_is_named(bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        read_progress(['{"batch": 0}', bad])


# -- files and the CLI ------------------------------------------------------------------


def quickstart_target(tmp: Path) -> str:
    """examples/quickstart.py (the ``isolated`` fixture forgets its module afterwards)."""
    return str(REPO / "examples" / "quickstart.py")


QUICKSTART_STEPS = [
    "poem",
    "split",
    "lower",
    "drop_short",
    "is_long",
    "with_length",
    "print",
    "mark_long",
    "print_long",
]


def test_the_cli_prints_mermaid_for_a_file_path_target(isolated, capsys):
    assert main([quickstart_target(isolated)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("---\n") and "flowchart TD" in out
    nodes, edges = parse_mermaid(out)
    assert [lines[0] for lines in nodes.values()] == QUICKSTART_STEPS
    assert nodes["s_poem"][1] == "input · FileInput"
    assert ("s_is_long", "-->", "true", "s_mark_long") in edges


def test_the_cli_takes_module_attr_and_factory_targets(isolated, capsys):
    (isolated / "fs_viz_flows.py").write_text(
        textwrap.dedent(
            """
            from flowspark.dataflow import Dataflow
            from flowspark.testing import TestingInput, TestingOutput

            def make(n):
                flow = Dataflow(f"made-{n}")
                s = flow.input("inp", TestingInput([]))
                for i in range(n):
                    s = s.map(f"m{i}", str)
                s.output("out", TestingOutput([]))
                return flow

            other = make(1)
            """
        )
    )
    assert main(["fs_viz_flows:make(3)"]) == 0
    nodes, _ = parse_mermaid(capsys.readouterr().out)
    assert [lines[0] for lines in nodes.values()] == ["inp", "m0", "m1", "m2", "out"]
    assert main(["fs_viz_flows:other"]) == 0
    assert 'title: "made-1"' in capsys.readouterr().out


def test_svg_and_html_files_are_written(isolated, capsys):
    target = quickstart_target(isolated)
    assert main([target, "--format", "svg", "-o", "flow.svg"]) == 0
    assert main([target, "-o", "flow.html"]) == 0  # the format from the suffix
    assert capsys.readouterr().out == ""
    svg = ET.parse(isolated / "flow.svg").getroot()
    assert svg.tag == f"{SVG_NS}svg"
    texts = [t.text for t in svg.iter(f"{SVG_NS}text")]
    for step_id in QUICKSTART_STEPS:
        assert step_id in texts
    assert len(list(svg.iter(f"{SVG_NS}polyline"))) == 8
    page = (isolated / "flow.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "src=" not in page  # readable offline
    inline = page[page.index("<svg") : page.index("</svg>") + len("</svg>")]
    assert ET.fromstring(inline).tag == f"{SVG_NS}svg"
    assert '<pre class="mermaid-source">' in page and "flowchart TD" in page
    assert "<td>drop_short</td><td>filter</td>" in page


def test_boxes_of_one_layer_do_not_overlap():
    svg = ET.fromstring(to_svg(branch_merge_flow()))
    rects = [
        tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
        for g in svg.iter(f"{SVG_NS}g")
        if (g.get("class") or "").startswith("step")
        for r in g.iter(f"{SVG_NS}rect")
    ]
    assert len(rects) == 8
    for (x1, y1, w1, h1), (x2, y2, w2, h2) in itertools.combinations(rects, 2):
        apart = x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1
        assert apart


def test_figures_from_a_progress_file_appear_in_the_labels(isolated, capsys):
    progress = isolated / "progress.jsonl"
    progress.write_text("\n".join(json.dumps(line) for line in PROGRESS) + "\n")
    target = quickstart_target(isolated)
    assert main([target, "--from", str(progress)]) == 0
    nodes, _ = parse_mermaid(capsys.readouterr().out)
    assert nodes["s_split"] == [
        "split",
        "flat_map · str.split",
        "in 1,000 · out 980 · late 2",
    ]
    assert nodes["s_poem"][-1] == "out 1,000"
    assert main([target, "--from", str(progress), "-o", "f.svg"]) == 0
    texts = [t.text for t in ET.parse(isolated / "f.svg").iter(f"{SVG_NS}text")]
    assert "in 1,000 · out 980 · late 2" in texts
    assert any(t and "3 micro-batches · 1.5 s in batches" in t for t in texts)
    assert any(t and "7 keys in state" in t for t in texts)
    html_page = to_html(flow_graph(sessionizer_example()), {"sessionizer": {"state_keys": 2}})
    assert '<td class="n">2</td>' in html_page


def test_figures_for_unknown_steps_are_reported_and_a_bad_file_fails(isolated, capsys):
    progress = isolated / "progress.jsonl"
    progress.write_text('{"steps": {"ghost": {"in": 1}}}\n')
    target = quickstart_target(isolated)
    assert main([target, "--from", str(progress)]) == 0
    assert "figures for steps not in the flow: ghost" in capsys.readouterr().err
    progress.write_text('{"batch": 0}\nnope\n')
    assert main([target, "--from", str(progress)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"flowspark.visualize: {progress}: line 2: not JSON (Expecting value)"]
    assert main([target, "--from", "absent.jsonl"]) == 2
    assert capsys.readouterr().err.startswith("flowspark.visualize: cannot read absent.jsonl")


@pytest.mark.parametrize(
    "target, message",
    [
        ("absent.py", "flowspark.visualize: no such file: absent.py"),
        ("no_such_module_xyz", "flowspark.visualize: could not import module 'no_such_module_xyz'"),
        ("json:loads", "flowspark.visualize: 'json:loads' is a function, not a Dataflow"),
        ("broken.py", "flowspark.visualize: broken.py:1: ZeroDivisionError: division by zero"),
        ("json:nope", "flowspark.visualize: 'json' has no attribute 'nope'"),
        ("absent.yaml", "flowspark.visualize: no such file: absent.yaml"),
    ],
)
def test_a_bad_target_fails_with_one_line(isolated, capsys, target, message):
    (isolated / "broken.py").write_text("x = 1 / 0\n")
    assert main([target]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), captured.err


# -- Numaflow pipelines --------------------------------------------------------------------

PIPELINE = """\
apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: even-odd-sum
spec:
  vertices:
    - name: in
      source:
        generator: {rpu: 5, duration: 1s}
    - name: cat
      udf:
        builtin: {name: cat}
    - name: compute-sum
      udf:
        container: {image: quay.io/numaio/numaflow-go/reduce-sum:stable}
        groupBy:
          window: {fixed: {length: 60s}}
          keyed: true
          storage: {emptyDir: {}}
    - name: out
      sink: {log: {}}
    - name: all
      sink: {blackhole: {}}
  edges:
    - {from: in, to: cat}
    - {from: cat, to: compute-sum}
    - {from: compute-sum, to: out}
    - from: cat
      to: all
      conditions: {tags: {values: [keep]}}
"""


def test_a_pipeline_renders_vertex_by_vertex(isolated, capsys):
    (isolated / "p.yaml").write_text(PIPELINE)
    udf = REPO / "examples" / "numaflow" / "udfs" / "reduce_sum.py"
    assert main(["p.yaml", "--udf", f"compute-sum={udf}"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    nodes, edges = parse_mermaid(captured.out)
    step_of = {node_id: lines[0] for node_id, lines in nodes.items()}
    for vertex in ("in", "cat", "compute-sum", "out", "all"):
        assert vertex in step_of.values()
    assert nodes["s_in"][1] == "input · GeneratorInput"
    named = {(step_of[s], label, step_of[t]): arrow for s, arrow, label, t in edges}
    assert named[("compute-sum.key", "by key", "compute-sum")] == "==>"
    assert ("cat", "", "cat->all") in named  # the edge's tag route, then the sink
    assert ("cat->all", "", "all") in named


def test_a_pipeline_without_its_handlers_is_drawn_from_its_spec(isolated, capsys):
    (isolated / "p.yaml").write_text(PIPELINE)
    assert main(["p.yaml", "-o", "p.svg"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flowspark.visualize: drawing the pipeline's")
    assert "--udf compute-sum=" in err[0]
    texts = [t.text for t in ET.parse(isolated / "p.svg").iter(f"{SVG_NS}text")]
    for vertex in ("in", "cat", "compute-sum", "out", "all"):
        assert vertex in texts
    assert "reduce · reduce-sum:stable · fixed 60s" in texts
    assert "tags or: keep" in texts and "by key" in texts


def test_a_pipeline_with_a_cycle_is_drawn_from_its_spec(capsys):
    path = REPO / "tests" / "data" / "numaflow" / "10-cycle-to-self.yaml"
    assert main([str(path)]) == 0
    captured = capsys.readouterr()
    assert "--udf retry=path/to/udf.py" in captured.err  # the map-retry image has no builtin
    _, edges = parse_mermaid(captured.out)
    assert ("s_retry", "-->", "tags or: retry", "s_retry") in edges
    ET.fromstring(to_svg(flow_graph(_spec(path))))


def test_a_pipeline_with_a_cycle_and_its_udf_is_drawn_as_the_flow_that_runs(capsys):
    path = REPO / "tests" / "data" / "numaflow" / "10-cycle-to-prev.yaml"
    retry = REPO / "examples" / "numaflow" / "udfs" / "retry.py"
    assert main([str(path), "--udf", f"retry={retry}"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    _, edges = parse_mermaid(captured.out)
    # The cycle's vertices (cat, retry) run as one keyed step (what is still on the
    # cycle after a micro-batch's rounds is its state); retry's outputs leave it.
    assert ("s_in__cat_enter", "==>", "by key", "s_cat_retry_cycle") in edges
    assert ("s_cat_retry_cycle", "-->", "", "s_retry_out") in edges
    assert ("s_retry__out", "-->", "", "s_out") in edges


def _spec(path: Path):
    from flowspark.pipeline import load_spec

    return load_spec(path)


def test_a_malformed_udf_flag_is_an_error(isolated, capsys):
    (isolated / "p.yaml").write_text(PIPELINE)
    assert main(["p.yaml", "--udf", "compute-sum"]) == 2
    assert capsys.readouterr().err.strip() == (
        "flowspark.visualize: --udf takes NAME=VALUE; got 'compute-sum'"
    )


# -- no Spark --------------------------------------------------------------------------------


def test_importing_the_visualizer_does_not_import_pyspark():
    code = "import sys, flowspark.visualize; assert 'pyspark' not in sys.modules, 'pyspark'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_drawing_the_quickstart_and_a_pipeline_never_touches_pyspark(tmp_path):
    (tmp_path / "p.yaml").write_text(PIPELINE)
    udf = REPO / "examples" / "numaflow" / "udfs" / "reduce_sum.py"
    code = BLOCK_PYSPARK + textwrap.dedent(
        f"""
        from flowspark.visualize import main
        assert main([{str(REPO / "examples" / "quickstart.py")!r}, "-o", "q.html"]) == 0
        assert main(["p.yaml", "--udf", "compute-sum={udf}", "-o", "p.svg"]) == 0
        assert "pyspark" not in sys.modules
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "print_long" in (tmp_path / "q.html").read_text()
    assert "compute-sum" in (tmp_path / "p.svg").read_text()


def test_the_module_runs_as_a_script(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.visualize", str(REPO / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "s_poem --> s_split" in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "flowspark.visualize", "absent.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == "flowspark.visualize: no such file: absent.py\n"


def test_figures_may_be_a_plain_mapping():
    text = to_mermaid(flat_map_example(), {"inp": {"out": 1}})
    assert "inp<br/>input · TestingInput<br/>out 1" in text
    assert Figures().summary() == ""
