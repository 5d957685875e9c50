"""Numaflow Pipeline YAML for the tests that load a small pipeline."""

from __future__ import annotations

import textwrap


def pipeline(name: str, spec: str, annotations: dict[str, str] | None = None) -> str:
    """A ``Pipeline`` named ``name`` whose ``spec:`` is ``spec`` (YAML, dedented here),
    with ``annotations`` in its metadata if given."""
    metadata = f"metadata:\n  name: {name}\n"
    if annotations:
        metadata += "  annotations:\n"
        metadata += "".join(f"    {key}: {value}\n" for key, value in annotations.items())
    body = textwrap.indent(textwrap.dedent(spec).strip("\n") + "\n", "  ")
    return f"apiVersion: numaflow.numaproj.io/v1alpha1\nkind: Pipeline\n{metadata}spec:\n{body}"


def in_udf_out(vertex: str, udf: str) -> str:
    """Pipeline ``p``: generator ``in`` -> ``vertex`` (a UDF whose ``udf:`` mapping is
    ``udf``: YAML whose lines after the first are indented as in the whole file) -> log
    sink ``out``."""
    template = pipeline(
        "p",
        """
        vertices:
          - name: in
            source:
              generator: {{rpu: 5, duration: 1s}}
          - name: {vertex}
            udf:
              {udf}
          - name: out
            sink:
              log: {{}}
        edges:
          - from: in
            to: {vertex}
          - from: {vertex}
            to: out
        """,
    )
    return template.format(vertex=vertex, udf=udf)
