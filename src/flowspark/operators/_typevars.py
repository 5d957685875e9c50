"""The type variables the operator modules share (items ``X``/``Y``, keyed values
``V``/``W``, states ``S``, dict keys and values ``DK``/``DV``)."""

from __future__ import annotations

from typing import TypeVar

X = TypeVar("X")
Y = TypeVar("Y")
V = TypeVar("V")
W = TypeVar("W")
S = TypeVar("S")
DK = TypeVar("DK")
DV = TypeVar("DV")
W_co = TypeVar("W_co", covariant=True)
