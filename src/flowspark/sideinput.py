"""pynumaflow 0.14's ``pynumaflow.sideinput`` on flowspark (swap the import prefix).

A pipeline's ``spec.sideInputs`` run their ``SideInputServer``'s handler on their
schedule; each UDF vertex that lists a side input reads its value from
``SIDE_INPUT_DIR_PATH/<name>`` (see :mod:`flowspark.api.udf.side_input`).
"""

from flowspark.api.udf.side_input import SIDE_INPUT_DIR_PATH, Response, SideInput, SideInputServer

__all__ = ["Response", "SideInput", "SideInputServer", "SIDE_INPUT_DIR_PATH"]
