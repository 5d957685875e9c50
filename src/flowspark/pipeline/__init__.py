"""Numaflow Pipeline specs on flowspark: load a Pipeline YAML into a Dataflow.

>>> from flowspark.pipeline import load
>>> flow = load('''
... apiVersion: numaflow.numaproj.io/v1alpha1
... kind: Pipeline
... metadata: {name: simple}
... spec:
...   vertices:
...     - {name: in, source: {generator: {rpu: 5, duration: 1s}}}
...     - {name: cat, udf: {container: {image: quay.io/numaio/numaflow-go/map-cat:stable}}}
...     - {name: out, sink: {log: {}}}
...   edges:
...     - {from: in, to: cat}
...     - {from: cat, to: out}
... ''')
>>> flow.flow_id, [s.step_id for s in flow.steps]
('simple', ['in', 'cat', 'out'])
"""

from flowspark.pipeline.build import PipelineOptions, build, load, secret_env_name
from flowspark.pipeline.durations import parse_duration
from flowspark.pipeline.errors import PipelineSpecError
from flowspark.pipeline.model import PipelineSpec
from flowspark.pipeline.spec import load_spec

__all__ = [
    "PipelineOptions",
    "PipelineSpec",
    "PipelineSpecError",
    "build",
    "load",
    "load_spec",
    "parse_duration",
    "secret_env_name",
]
