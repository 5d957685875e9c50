"""The old home of :class:`~flowspark.runtime.numaflow.keyed.WalIndex`.

An accumulator key's state holds its WAL index pickled by module path, and
recovery directories written before the Numaflow runtime moved to
:mod:`flowspark.runtime.numaflow` name this module. Kept so that they resume.

>>> import pickle
>>> from flowspark.runtime.numaflow.keyed import WalIndex
>>> old = pickle.dumps(WalIndex(3), protocol=0).replace(
...     b"flowspark.runtime.numaflow.keyed", b"flowspark.runtime.udf_keyed")
>>> pickle.loads(old)
WalIndex(trimmed=3, entries=(), out_wm=-4611686018427387904)
"""

from flowspark.runtime.numaflow.keyed import WalIndex

__all__ = ["WalIndex"]
