"""Code that runs inside Spark's Python workers (and its pure-Python logic).

Nothing here starts Spark; every piece is unit-tested without it.
"""
