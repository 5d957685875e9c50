"""A map UDF for a MonoVertex's ``bypass``: even numbers go on tagged ``even``, odd
ones tagged ``corrupted`` (the bypass sends those to the fallback sink), values that
are not numbers tagged ``parse-error``."""

from flowspark.mapper import Datum, MapServer, Message, Messages


def tag_parity(keys: list[str], datum: Datum) -> Messages:
    try:
        number = int(datum.value)
    except ValueError:
        return Messages(Message(datum.value, keys=keys, tags=["parse-error"]))
    tag = "even" if number % 2 == 0 else "corrupted"
    return Messages(Message(datum.value, keys=keys, tags=[tag]))


if __name__ == "__main__":
    MapServer(tag_parity).start()
