"""Numaflow Pipeline YAML for the tests that load a small pipeline."""

from __future__ import annotations


def in_udf_out(vertex: str, udf: str) -> str:
    """Pipeline ``p``: generator ``in`` -> ``vertex`` (a UDF whose ``udf:`` mapping is
    ``udf``, YAML on one line) -> log sink ``out``."""
    return f"""\
apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
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
"""
