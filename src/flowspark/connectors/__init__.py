"""Built-in inputs and outputs: ``files``, ``stdio``, NATS ``jetstream``, and Numaflow's
(``numaflow``: the generator source, the log, blackhole and user-defined sinks, and the
HTTP source in ``numaflow.http``).

The in-memory ones for tests live in ``memory`` and are exported by ``flowspark.testing``.
"""
