"""Helpers mirroring ``pynumaflow.shared`` (handlers import ``NonBlockingIterator`` from here)."""
