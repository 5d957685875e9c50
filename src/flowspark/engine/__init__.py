"""The Spark engine: Java discovery, the session, sources, sinks, query building."""
