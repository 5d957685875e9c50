"""How to define dataflows: create a :class:`Dataflow`, then add steps with its methods."""

from flowspark.api.dataflow import Dataflow, Stream

__all__ = ["Dataflow", "Stream"]
