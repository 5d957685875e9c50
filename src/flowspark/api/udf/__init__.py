"""Pure-Python SDK types that let pynumaflow 0.14 UDF code run on flowspark unchanged."""
