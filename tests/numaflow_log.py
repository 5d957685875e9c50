"""Parse what Numaflow's log sink prints (its JSON log lines) back into records."""

from __future__ import annotations

import json
from collections.abc import Iterable


def log_records(lines: Iterable[str]) -> list[dict]:
    """The log sink's records among ``lines`` (other lines are skipped)."""
    records = []
    for line in lines:
        if not line.startswith("{"):
            continue
        text = json.loads(line)["message"]
        payload, rest = text.removeprefix("Payload - ").split(" Keys - ", 1)
        keys, rest = rest.split(" EventTime - ", 1)
        event_time, rest = rest.split(" Headers - ", 1)
        headers, ident = rest.rsplit(" ID - ", 1)
        records.append(
            {
                "payload": payload,
                "keys": keys,
                "event_time": int(event_time),
                "headers": headers,
                "id": ident,
            }
        )
    return records
