"""A pseudo-terminal for tests of what is drawn on a terminal."""

from __future__ import annotations

import os
import threading


def read_in_background(parent: int, drawn: bytearray) -> threading.Thread:
    """Start a thread that appends to ``drawn`` what is written to the terminal whose
    parent end is ``parent``, until every writer has closed the terminal."""

    def read() -> None:
        while True:
            try:
                chunk = os.read(parent, 4096)
            except OSError:  # every writer has closed the terminal
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader
