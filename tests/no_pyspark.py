"""Code that makes the Python it runs in refuse to import pyspark: the start of a child
process's program, for tests that show something works without Spark."""

BLOCK_PYSPARK = """
import sys


class NoPyspark:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError(f"blocked: {name}")


sys.meta_path.insert(0, NoPyspark())
"""
