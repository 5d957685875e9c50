"""How to define dataflows: create a :class:`Dataflow`, then add steps with its methods
(bytewax 0.17) or with the operators of :mod:`flowspark.operators` (bytewax 0.21,
whose custom operators use :func:`operator` and :func:`f_repr` from here)."""

from flowspark.api.dataflow import Dataflow, Stream
from flowspark.operators.scoping import f_repr, operator

__all__ = ["Dataflow", "Stream", "f_repr", "operator"]
