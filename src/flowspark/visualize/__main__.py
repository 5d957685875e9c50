"""``python -m flowspark.visualize``: see :mod:`flowspark.visualize`."""

import sys

from flowspark.visualize.command import main

if __name__ == "__main__":
    sys.exit(main())
