"""A Numaflow Pipeline spec as a flowspark Dataflow.

Each vertex becomes steps named after it; each edge feeds its ``to`` vertex,
through a tag ``route`` when it has conditions; several edges into one vertex
merge (a join). Sources read Numaflow datums (``http``: the journal the HTTP
server writes; ``generator``; ``udsource``: the ``Sourcer`` its UDF script starts,
see :mod:`flowspark.connectors.numaflow.udsource`), a source ``transformer`` and map vertices run
their Python handler (or a pre-1.6 builtin; a batch map server runs as ``batch_map``
in batches of the vertex's ``limits.readBatchSize``), ``groupBy`` vertices run
``reduce_stream`` (fixed/sliding windows) or ``accumulate``, and sinks write
Numaflow's log lines, nothing (blackhole) or call a ``Sinker`` (an example:
:mod:`flowspark.pipeline`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypedDict, Unpack

from flowspark.api.dataflow import MAP_STREAM_CONCURRENCY, Dataflow, Stream, map_handler_kind
from flowspark.api.inputs import SourceWatermark
from flowspark.api.udf.handlers import BatchMapper
from flowspark.api.udf.servers import derives_from, handler_factory
from flowspark.api.udf.side_input import SideInputServer, retriever
from flowspark.api.window import SlidingWindow, TumblingWindow
from flowspark.connectors.jetstream import JetStreamInput
from flowspark.connectors.numaflow import (
    BlackholeOutput,
    GeneratorInput,
    LogOutput,
    RetryPolicy,
    SourcerInput,
    UdSinkOutput,
)
from flowspark.connectors.numaflow.http import HttpInput, HttpRoute, HttpServer, resolve_address
from flowspark.connectors.numaflow.sqs import SqsSourcer
from flowspark.pipeline.errors import PipelineSpecError
from flowspark.pipeline.model import (
    ContainerSpec,
    Edge,
    PipelineSpec,
    SideInputSpec,
    SinkSpec,
    Vertex,
)
from flowspark.pipeline.mono_vertex import BypassTo, udf_names
from flowspark.pipeline.side_inputs import SideInputService, SideInputVertex
from flowspark.pipeline.spec import load_spec
from flowspark.pipeline.udfs import ANNOTATION_PREFIX, server_from_script, server_kind
from flowspark.pipeline.validate import go_quote
from flowspark.runtime.numaflow.batch_map import BatchMapRunner
from flowspark.runtime.numaflow.builtins import (
    build_map_builtin,
    build_transformer_builtin,
    builtin_for_image,
)
from flowspark.runtime.numaflow.cycle import CycleRunner, EnterCycle, LeaveCycle, PerItemStep
from flowspark.runtime.numaflow.datums import MapStreamRunner, TagRoute
from flowspark.runtime.numaflow.script_host import ScriptProcess
from flowspark.runtime.numaflow.transform import TransformRunner
from flowspark.runtime.storage import Location
from flowspark.shared.components import strongly_connected
from flowspark.shared.times import EPOCH

__all__ = ["load", "build", "secret_env_name", "PipelineOptions"]

log = logging.getLogger(__name__)

# UDF kinds a vertex accepts from a script, by vertex role.
_KINDS = {
    "map": ("map", "map_stream", "batch_map"),
    "reduce": ("reduce", "reduce_stream"),
    "accumulator": ("accumulate",),
    "sink": ("sink",),
    "transformer": ("sourcetransform",),
    "source": ("source",),
}


def secret_env_name(name: str, key: str) -> str:
    """The environment variable that holds secret ``name``/``key``.

    >>> secret_env_name("my-secret", "my-key")
    'FLOWSPARK_SECRET_MY_SECRET_MY_KEY'
    """
    return "FLOWSPARK_SECRET_" + re.sub(r"[^A-Z0-9]", "_", f"{name}_{key}".upper())


class PipelineOptions(TypedDict, total=False):
    """The keyword arguments of :func:`load` and :func:`build`, all optional.

    ``udfs`` maps a vertex name to its handler: a UDF script path, a server
    object, or a handler. ``secrets`` maps ``"name/key"`` to a secret's value
    (HTTP sources' ``auth.token``; else the env var :func:`secret_env_name`).
    ``state_dir`` keeps the HTTP sources' journals (give the recovery
    directory's neighbour so a restart finds them; default: a fresh temporary
    directory); ``http_host``/``http_port`` are their server's address and
    ``certfile``/``keyfile`` its TLS files. ``outputs`` maps a sink vertex's name
    to a flowspark output that replaces it (e.g. a ``FileOutput`` to keep what
    reaches the sink).
    """

    udfs: Mapping[str, Any] | None
    secrets: Mapping[str, str] | None
    state_dir: str | os.PathLike[str] | None
    http_host: str | None
    http_port: int | None
    certfile: str | None
    keyfile: str | None
    outputs: Mapping[str, Any] | None


def load(source: str | os.PathLike[str], **options: Unpack[PipelineOptions]) -> Dataflow:
    """Load a Numaflow Pipeline (a YAML file path or YAML text) as a Dataflow.

    ``options``: see :class:`PipelineOptions`. Fields that only matter on
    Kubernetes are listed once in a warning of the ``flowspark.pipeline`` logger.
    Fails with one :class:`PipelineSpecError` before Spark starts.
    """
    text_given = isinstance(source, str) and "\n" in source
    spec = load_spec(source)
    base = Path.cwd() if text_given else Path(source).resolve().parent
    return build(spec, base_dir=base, **options)


def build(
    spec: PipelineSpec, *, base_dir: Path | None = None, **options: Unpack[PipelineOptions]
) -> Dataflow:
    """``spec`` as a Dataflow (see :func:`load`; ``options``: :class:`PipelineOptions`)."""
    unknown = sorted(options.keys() - PipelineOptions.__optional_keys__)
    if unknown:  # as Python says it of a parameter the signature lacks
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} (see PipelineOptions)")
    ignored = [f for f in spec.ignored if not _is_flowspark_annotation(f, spec)]
    ignored += [
        f"spec.vertices[{i}].partitions"  # Spark's tasks follow the cores
        for i, v in enumerate(spec.vertices)
        if v.partitions > 1
    ]
    storage = [f for f in ignored if f.endswith(".groupBy.storage")]
    ignored = [f for f in ignored if f not in storage]
    if ignored:
        log.warning(
            "pipeline %s: ignoring fields that only matter on Kubernetes: %s",
            spec.name,
            ", ".join(ignored),
        )
    if storage:
        log.info(
            "pipeline %s: groupBy.storage is checked as Numaflow checks it and has no "
            "effect here: keyed state lives in Spark's state store under the recovery "
            "directory (-r)",
            spec.name,
        )
    handlers = dict(options.get("udfs") or {})
    if spec.kind == "MonoVertex":
        spec, handlers = _mono_vertex_names(spec, handlers)
    secrets = dict(options.get("secrets") or {})
    outputs = dict(options.get("outputs") or {})
    return _Builder(spec, base_dir or Path.cwd(), handlers, secrets, outputs).build(options)


def _mono_vertex_names(
    spec: PipelineSpec, udfs: dict[str, Any]
) -> tuple[PipelineSpec, dict[str, Any]]:
    """A MonoVertex's handlers (``--udf`` and annotations) named by the field they
    replace (``udsource``, ``udf`` …), renamed as its pipeline's vertices name them."""
    names = udf_names(spec.name)
    unknown = sorted(set(udfs) - set(names))
    if unknown:
        raise PipelineSpecError(
            f"--udf names no part of MonoVertex {spec.name!r}: {', '.join(unknown)}; give "
            f"one of {', '.join(names)}"
        )
    renamed_keys = {ANNOTATION_PREFIX + k: ANNOTATION_PREFIX + v for k, v in names.items()}
    annotations = {renamed_keys.get(key, key): value for key, value in spec.annotations.items()}
    renamed = {names[key]: handler for key, handler in udfs.items()}
    return dataclasses.replace(spec, annotations=annotations), renamed


def _handler_names(spec: PipelineSpec) -> set[str]:
    """The names a handler may be given under: a vertex's, a source's
    ``VERTEX.transformer``, a sink's ``VERTEX.fb`` (fallback) and ``VERTEX.ons``
    (onSuccess)."""
    names = {v.name for v in spec.vertices}
    names |= {f"{v.name}.transformer" for v in spec.sources}
    names |= {f"{v.name}{role}" for v in spec.sinks for role in (".fb", ".ons")}
    names |= {s.name for s in spec.side_inputs}
    return names


def _is_batch_map(server: Any) -> bool:
    """A map vertex's UDF is a batch map: a ``BatchMapAsyncServer`` or ``BatchMapper``."""
    return server_kind(server) == "batch_map" or derives_from(type(server), BatchMapper)


def _is_flowspark_annotation(field: str, spec: PipelineSpec) -> bool:
    """``metadata.annotations`` holding only flowspark's own keys is not ignored."""
    if not field.startswith("metadata.annotations"):
        return False
    return all(k.startswith(ANNOTATION_PREFIX) for k in spec.annotations)


class _Builder:
    def __init__(
        self,
        spec: PipelineSpec,
        base_dir: Path,
        udfs: dict[str, Any],
        secrets: dict[str, str],
        replaced_outputs: dict[str, Any],
    ) -> None:
        self.spec = spec
        self.base_dir = base_dir
        self.udfs = udfs
        self.secrets = secrets
        unknown = sorted(set(udfs) - _handler_names(spec))
        if unknown:
            raise PipelineSpecError(f"--udf names no vertex of the pipeline: {', '.join(unknown)}")
        self.flow = Dataflow(spec.name)
        self.outputs: dict[str, Stream] = {}
        self.replaced_outputs = replaced_outputs
        self.sink_outputs: dict[str, Any] = {}
        self.side_input_vertices: dict[str, SideInputVertex] = {}

    # -- the graph ---------------------------------------------------------------

    def build(self, options: PipelineOptions) -> Dataflow:
        """The Dataflow, with the HTTP sources' journal and server as ``options`` say."""
        order = self._order()
        sinks = {v.name for v in self.spec.vertices if v.kind == "sink"}
        unknown = sorted(set(self.replaced_outputs) - sinks)
        if unknown:
            raise PipelineSpecError(f"outputs names no sink vertex: {', '.join(unknown)}")
        http = [v for v in self.spec.sources if v.source is not None and v.source.kind == "http"]
        journal_dir = None
        if http:
            state_dir = options.get("state_dir") or tempfile.mkdtemp(prefix="flowspark-http-")
            where = Location.parse(state_dir)
            if not where.is_local:
                raise PipelineSpecError(
                    f"source {http[0].name!r}: the HTTP source journals events on this "
                    f"machine's disk (appends, fsync, locks), not at {where.shown}: give a "
                    "recovery directory that is a local path (or on storage mounted here)"
                )
            journal_dir = where.local_path
            journal_dir.mkdir(parents=True, exist_ok=True)
        side_inputs = self._side_inputs(order)
        for group in order:
            if self._is_cycle(group):
                self._cycle(group)
                continue
            vertex = group[0]
            if vertex.kind == "source":
                self.outputs[vertex.name] = self._source(vertex, journal_dir)
            else:
                upstream = self._inputs(vertex)
                if vertex.kind == "udf":
                    self.outputs[vertex.name] = self._udf(vertex, upstream)
                else:
                    self._sink(vertex, upstream)
        if journal_dir is not None:  # there are HTTP sources
            host, port = resolve_address(options.get("http_host"), options.get("http_port"))
            routes = [HttpRoute(v.name, self._token(v)) for v in http]
            server = HttpServer(
                routes,
                journal_dir,
                host,
                port,
                certfile=options.get("certfile"),
                keyfile=options.get("keyfile"),
                healthy_when_running=True,
            )
            self.flow.services.append(server)
        if side_inputs is not None:  # UDFs ready before the first datum arrives
            self.flow.services.insert(0, side_inputs)
        return self.flow

    def _side_inputs(self, order: list[list[Vertex]]) -> SideInputService | None:
        """The run's side inputs: each one's retrieve handler, and a UDF process for each
        map vertex that lists some (other vertices cannot list them here). ``order``:
        the vertices in groups, as :meth:`_order` gives them."""
        if not self.spec.side_inputs:
            return None
        on_cycles = {v.name for group in order if self._is_cycle(group) for v in group}
        for vertex in self.spec.vertices:
            if not vertex.side_inputs:
                continue
            udf = vertex.udf
            what = None
            if udf is None or udf.group_by is not None:
                what = f"a {'reduce' if udf is not None else vertex.kind} vertex"
            elif udf.builtin is not None:
                what = "a builtin"
            elif vertex.name in on_cycles:
                what = "on a cycle"
            if what is not None:
                raise PipelineSpecError(
                    f'vertex "{vertex.name}": flowspark gives side inputs to map UDF vertices '
                    f"that are not on a cycle; this one is {what}"
                )
            process = ScriptProcess(self._script(vertex), vertex.name)
            self.side_input_vertices[vertex.name] = SideInputVertex(process, vertex.side_inputs)
        retrievals = [(s, self._retrieval(s)) for s in self.spec.side_inputs]
        return SideInputService(retrievals, list(self.side_input_vertices.values()))

    def _retrieval(self, side_input: SideInputSpec) -> Any:
        """A side input's retrieve handler, from its script (``--udf NAME=file.py``)."""
        name = side_input.name
        given = self._udf_source(name)
        if given is None:
            raise PipelineSpecError(
                f'side input "{name}": its container image {side_input.container.image!r} '
                f"cannot run on flowspark; give its Python handler with --udf {name}="
                f"path/to/side_input.py or the annotation {ANNOTATION_PREFIX}{name}: "
                "path/to/side_input.py"
            )
        if isinstance(given, (str, os.PathLike)):
            given = server_from_script(self._resolved(name, given), name)
        if server_kind(given) not in (None, "side_input"):
            raise PipelineSpecError(
                f'side input "{name}": its UDF must be a SideInputServer; it is a '
                f"{server_kind(given)} server ({type(given).__name__})"
            )
        if isinstance(given, SideInputServer):
            return given.retrieve
        try:
            return retriever(given)
        except TypeError as exc:
            raise PipelineSpecError(f'side input "{name}": {exc}') from None

    def _script(self, vertex: Vertex) -> Path:
        """The UDF file given for a vertex whose UDF runs in a process of its own."""
        name = vertex.name
        given = self._udf_source(name)
        if not isinstance(given, (str, os.PathLike)):
            raise PipelineSpecError(
                f'vertex "{vertex.name}" reads side inputs, so its UDF runs as a script in a '
                f"process of its own: give it as a file, --udf {name}=path/to/udf.py or the "
                f"annotation {ANNOTATION_PREFIX}{name}: path/to/udf.py"
            )
        path = self._resolved(name, given)
        if not path.is_file():
            raise PipelineSpecError(
                f'vertex "{vertex.name}": UDF file {str(path)!r} does not exist'
            )
        return path

    def _resolved(self, name: str, given: str | os.PathLike[str]) -> Path:
        """A UDF file's path: a ``--udf`` one is relative to the working directory, an
        annotation's to the YAML file."""
        path = Path(given)
        if not path.is_absolute() and name in self.udfs:
            path = Path.cwd() / path
        return path

    def _order(self) -> list[list[Vertex]]:
        """The vertices in topological order, in groups: a vertex alone, or the
        vertices of one cycle (see :meth:`_cycle`), in spec order."""
        groups = strongly_connected(
            [v.name for v in self.spec.vertices], [(e.source, e.target) for e in self.spec.edges]
        )
        group_of = {name: i for i, group in enumerate(groups) for name in group}
        indegree = [0] * len(groups)
        for edge in self.spec.edges:
            if group_of[edge.source] != group_of[edge.target]:
                indegree[group_of[edge.target]] += 1
        ready = [i for i in range(len(groups)) if indegree[i] == 0]
        order: list[list[Vertex]] = []
        while ready:
            i = ready.pop(0)
            order.append([self.spec.vertex(name) for name in groups[i]])
            for name in groups[i]:
                for edge in self.spec.out_edges(name):
                    j = group_of[edge.target]
                    if j != i:
                        indegree[j] -= 1
                        if indegree[j] == 0:
                            ready.append(j)
        return order

    def _is_cycle(self, group: list[Vertex]) -> bool:
        return len(group) > 1 or any(
            e.target == group[0].name for e in self.spec.out_edges(group[0].name)
        )

    def _inputs(self, vertex: Vertex) -> Stream:
        """The stream into ``vertex``: its in-edges, each routed by its tags, merged."""
        streams = [self._edge_stream(edge) for edge in self.spec.in_edges(vertex.name)]
        if len(streams) == 1:
            return streams[0]
        return streams[0].merge(*streams[1:], step_id=f"{vertex.name}.in")

    def _edge_stream(self, edge: Edge) -> Stream:
        """What ``edge`` carries: its source's outputs that meet its conditions."""
        stream = self.outputs[edge.source]
        if edge.tags is not None:
            route_id = f"{edge.source}->{edge.target}"
            stream = stream.route(route_id, tags=edge.tags, operator=edge.operator)
        return stream

    def _cycle(self, members: list[Vertex]) -> None:
        """The map vertices of one cycle as one step (see
        :mod:`flowspark.runtime.numaflow.cycle`): the datums its in-edges bring enter at
        their vertex, go round until they leave, and each vertex with edges out of
        the cycle gets a stream of its outputs."""
        names = {v.name for v in members}
        step_id = "+".join(v.name for v in members)
        entries = [
            self._edge_stream(edge).map(
                f"{edge.source}->{edge.target}.enter", EnterCycle(edge.target)
            )
            for v in members
            for edge in self.spec.in_edges(v.name)
            if edge.source not in names
        ]
        if not entries:
            raise PipelineSpecError(
                f"vertices {', '.join(go_quote(v.name) for v in members)} are on a cycle no "
                "edge leads into: nothing would ever reach them"
            )
        inside = [e for e in self.spec.edges if e.source in names and e.target in names]
        runner = CycleRunner(
            {v.name: self._cycle_member(v) for v in members},
            [
                (e.source, e.target, None if e.tags is None else TagRoute(e.tags, e.operator))
                for e in inside
            ],
            exits=frozenset(
                e.source for e in self.spec.edges if e.source in names and e.target not in names
            ),
        )
        stream = (
            entries[0]
            if len(entries) == 1
            else entries[0].merge(*entries[1:], step_id=f"{step_id}.in")
        )
        looped = stream.cycle(f"{step_id}.cycle", runner)
        for name in sorted(runner.exits):
            self.outputs[name] = looped.filter_map(f"{name}.out", LeaveCycle(name))

    def _cycle_member(self, vertex: Vertex) -> Any:
        """A map vertex on a cycle, as a step of :class:`CycleRunner`."""
        udf = vertex.udf
        if udf is None or udf.group_by is not None:
            raise PipelineSpecError(
                f'vertex "{vertex.name}" is on a cycle: flowspark runs cycles of map vertices only'
            )
        builtin = self._map_builtin(vertex)
        if builtin is not None:
            return PerItemStep(vertex.name, builtin)
        server = self._server(vertex, "map", udf.container)
        if _is_batch_map(server):
            factory = handler_factory(server, "batch_map")
            return BatchMapRunner(vertex.name, factory, vertex.limits.read_batch_size)
        factory = handler_factory(server, map_handler_kind(server))
        return MapStreamRunner(vertex.name, factory, MAP_STREAM_CONCURRENCY)

    # -- vertices ------------------------------------------------------------------

    def _source(self, vertex: Vertex, journal_dir: Path | None) -> Stream:
        source = vertex.source
        assert source is not None
        if source.kind == "http":
            assert journal_dir is not None  # made for the HTTP sources
            inp: Any = HttpInput(journal_dir, vertex.name)
        elif source.kind == "udsource":
            server = self._server(vertex, "source", source.udsource)
            inp = SourcerInput(
                getattr(server, "sourcer_instance", server),
                vertex.name,
                read_batch_size=vertex.limits.read_batch_size,
                read_timeout=vertex.limits.read_timeout,
            )
        elif source.kind == "sqs":
            assert source.sqs is not None
            inp = SourcerInput(
                SqsSourcer(source.sqs),
                vertex.name,
                read_batch_size=vertex.limits.read_batch_size,
                read_timeout=vertex.limits.read_timeout,
                text_offsets=True,
            )
        elif source.kind == "jetstream":
            js = source.jetstream
            assert js is not None
            inp = JetStreamInput(
                js.url,
                js.stream,
                subjects=list(js.filter_subjects) or None,
                start="first" if js.deliver_policy == "all" else "new",
                items="datum",
            )
        else:
            g = source.generator
            assert g is not None
            # GeneratorSpec's fields are GeneratorInput's arguments, by name.
            inp = GeneratorInput(
                vertex.name, **asdict(g), read_batch_size=vertex.limits.read_batch_size
            )
        inp.watermark = self._source_watermark()
        stream = self.flow.source(vertex.name, inp)
        transformer = source.transformer
        if transformer is None:
            return stream
        if transformer.builtin is not None:
            b = transformer.builtin
            fn = build_transformer_builtin(b.name, list(b.args), dict(b.kwargs))
        else:
            # Its own name when the vertex's source is a handler too (else either).
            own = f"{vertex.name}.transformer"
            mine = source.kind == "udsource" or self._udf_source(own) is not None
            server = self._server(
                vertex, "transformer", transformer.container, udf_name=own if mine else None
            )
            fn = TransformRunner(server.handler)
        return stream.flat_map(f"{vertex.name}.transformer", fn)

    def _source_watermark(self) -> Any:
        """Numaflow's source watermark policy from ``spec.watermark`` (None: disabled;
        keyed vertices then share the vertex watermark of the datums' event times)."""
        wm = self.spec.watermark
        if wm.disabled:
            return None
        idle = wm.idle_source
        if idle is None:
            return SourceWatermark(max_delay=wm.max_delay)
        return SourceWatermark(
            max_delay=wm.max_delay,
            idle_threshold=idle.threshold,
            idle_step=idle.step_interval,
            idle_increment=idle.increment_by,
            init_source_delay=idle.init_source_delay,
        )

    def _udf(self, vertex: Vertex, upstream: Stream) -> Stream:
        udf = vertex.udf
        assert udf is not None
        group = udf.group_by
        if group is None:
            builtin = self._map_builtin(vertex)
            if builtin is not None:
                return upstream.flat_map(vertex.name, builtin)
            hosted = self.side_input_vertices.get(vertex.name)
            if hosted is not None:
                return upstream.map_stream(vertex.name, hosted.process.handler())
            server = self._server(vertex, "map", udf.container)
            if _is_batch_map(server):  # Numaflow hands it batches of readBatchSize
                return upstream.batch_map(vertex.name, server, vertex.limits.read_batch_size)
            return upstream.map_stream(vertex.name, server)
        # The source watermark applies maxDelay; with the watermark disabled, each
        # key keeps its own clock and no delay applies.
        window = group.window
        if window.kind == "accumulator":
            handler = self._server(vertex, "accumulator", udf.container)
            assert window.timeout is not None
            return upstream.accumulate(vertex.name, handler, window.timeout)
        if window.kind == "session":
            raise PipelineSpecError(
                f'vertex "{vertex.name}": groupBy.window.session is not supported by '
                "flowspark (pynumaflow has no session reducer); use fixed, sliding or "
                "accumulator"
            )
        assert window.length is not None
        config: Any
        if window.kind == "fixed":
            config = TumblingWindow(length=window.length, align_to=EPOCH)
        else:
            assert window.slide is not None
            config = SlidingWindow(length=window.length, offset=window.slide, align_to=EPOCH)
        handler = self._server(vertex, "reduce", udf.container)
        wanted = "reduce_stream" if window.streaming else "reduce"
        if server_kind(handler) not in (None, wanted):
            streaming = "true" if window.streaming else "false"
            raise PipelineSpecError(
                f'vertex "{vertex.name}": window.{window.kind}.streaming is {streaming}, '
                f"so its UDF must be a {wanted} server; the UDF file starts a "
                f"{server_kind(handler)} server"
            )
        return upstream.reduce_stream(
            vertex.name,
            handler,
            config,
            allowed_lateness=group.allowed_lateness,
            keyed=group.keyed,
        )

    def _sink(self, vertex: Vertex, upstream: Stream) -> None:
        sink = vertex.sink
        assert sink is not None
        output = self.replaced_outputs.get(vertex.name)
        bypass = self.spec.bypass
        if bypass is not None:  # a MonoVertex's: some map messages skip to other sinks
            for name, role, spec in (
                ("fallback", ".fb", sink.fallback),
                ("onSuccess", ".ons", sink.on_success),
            ):
                if spec is not None:
                    to_it = BypassTo(name, bypass)
                    skipping = upstream.filter(f"{vertex.name}.bypass{role}", to_it)
                    skipping.output(f"{vertex.name}{role}", self._output(vertex, spec, role))
            upstream = upstream.filter(f"{vertex.name}.bypass", BypassTo("sink", bypass))
        upstream.output(vertex.name, output or self._output(vertex, sink))

    def _output(self, vertex: Vertex, sink: SinkSpec, role: str = "") -> Any:
        """The output of ``vertex``'s ``sink`` (``role``: ``.fb`` its fallback, ``.ons``
        its onSuccess sink); one object per sink, however many steps write to it."""
        name = f"{vertex.name}{role}"
        if name not in self.sink_outputs:
            self.sink_outputs[name] = self._new_output(vertex, sink, role)
        return self.sink_outputs[name]

    def _new_output(self, vertex: Vertex, sink: SinkSpec, role: str) -> Any:
        if sink.kind == "log":
            return LogOutput(vertex.name)
        if sink.kind == "blackhole":
            return BlackholeOutput()
        name = f"{vertex.name}{role}"
        server = self._server(vertex, "sink", sink.container, udf_name=name)
        fallback = None if sink.fallback is None else self._output(vertex, sink.fallback, ".fb")
        on_success = (
            None if sink.on_success is None else self._output(vertex, sink.on_success, ".ons")
        )
        retry = None if sink.retry is None else RetryPolicy(**asdict(sink.retry))
        handler = getattr(server, "handler", server)
        return UdSinkOutput(
            handler, vertex.name, fallback=fallback, on_success=on_success, retry=retry
        )

    # -- handlers --------------------------------------------------------------------

    def _map_builtin(self, vertex: Vertex) -> Any:
        """A map vertex's builtin function: its ``builtin``, or the one its image stands
        for (Numaflow's example images ``map-cat``, ``map-filter-id`` …) when no UDF
        file is given for it."""
        udf = vertex.udf
        assert udf is not None
        if udf.builtin is not None:
            b = udf.builtin
            return build_map_builtin(b.name, list(b.args), dict(b.kwargs))
        if self._udf_source(vertex.name) is None and udf.container is not None:
            builtin = builtin_for_image(udf.container.image)
            if builtin is not None:
                name, kwargs = builtin
                return build_map_builtin(name, [], dict(kwargs))
        return None

    def _udf_source(self, name: str) -> Any:
        if name in self.udfs:
            return self.udfs[name]
        path = self.spec.annotations.get(ANNOTATION_PREFIX + name)
        return None if path is None else self.base_dir / path

    def _server(
        self,
        vertex: Vertex,
        role: str,
        container: ContainerSpec | None,
        udf_name: str | None = None,
    ) -> Any:
        """The server (or handler) the vertex's UDF script gives, checked against ``role``."""
        name = udf_name or vertex.name
        given = self._udf_source(name)
        if given is None:
            image = f"container image {container.image!r}" if container else "container"
            if self.spec.kind == "MonoVertex":  # its handlers go by the field they replace
                field = {v: k for k, v in udf_names(self.spec.name).items()}[name]
                where = f'MonoVertex "{self.spec.name}": its {field} {image}'
                name = field
            else:
                where = f'vertex "{vertex.name}": its {image}'
            raise PipelineSpecError(
                f"{where} cannot run on flowspark; give its Python handler with --udf "
                f"{name}=path/to/udf.py or the annotation {ANNOTATION_PREFIX}{name}: "
                "path/to/udf.py"
            )
        if isinstance(given, (str, os.PathLike)):
            given = server_from_script(self._resolved(name, given), vertex.name)
        kind = server_kind(given)
        if kind is not None and kind not in _KINDS[role]:
            raise PipelineSpecError(
                f'vertex "{vertex.name}" needs a {" or ".join(_KINDS[role])} UDF; its UDF '
                f"is a {kind} server ({type(given).__name__})"
            )
        return given

    def _token(self, vertex: Vertex) -> str | None:
        source = vertex.source
        assert source is not None and source.http is not None
        ref = source.http.auth_token
        if ref is None:
            return None
        label = f"{ref.name}/{ref.key}"
        env = secret_env_name(ref.name, ref.key)
        value = self.secrets.get(label) or os.environ.get(env)
        if not value:
            raise PipelineSpecError(
                f'vertex "{vertex.name}": source.http.auth.token needs secret {label}; give '
                f"--secret {label}=TOKEN or set {env}"
            )
        return value
