"""Built-in inputs and outputs: ``files`` and ``stdio``.

The in-memory ones for tests live in ``memory`` and are exported by ``flowspark.testing``.
"""
