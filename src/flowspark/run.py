"""``python -m flowspark.run module:flow [--bounded] [-r DIR] [--master URL]``.

See :mod:`flowspark.cli` for the options.
"""

from flowspark.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
