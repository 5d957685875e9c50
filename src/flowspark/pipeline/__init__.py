"""Numaflow Pipeline specs on flowspark: load a Pipeline YAML into a Dataflow."""
