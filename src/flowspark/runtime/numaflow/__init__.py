"""Numaflow's side of the runtime: what its operators and handlers run in Spark's workers.

Items become datums (:mod:`~flowspark.runtime.numaflow.convert`); the stateless
Numaflow steps (``to_datums``, routing, ``map_stream``: :mod:`.datums`; ``batch_map``:
:mod:`.batch_map`), builtins and source transformers run fused in the stages; the keyed
UDF kinds (``accumulate``, ``reduce_stream``: :mod:`.keyed`) drive long-lived async
handlers (:mod:`.run`) kept in a registry (:mod:`.handlers`) or a resident host process
(:mod:`.handler_host`). The bytewax core (``flowspark.runtime``) imports from here
only to dispatch: ``stage`` for the built stateless steps, ``logics`` for the keyed
kinds.
"""
