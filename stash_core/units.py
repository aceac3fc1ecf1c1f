"""Units and names every layer shares: stall names, sizes, rates, durations, number coercion."""

from __future__ import annotations

# The five stalls in the order the differential runs add them.
STALLS = ("compute", "interconnect", "network", "cpu", "disk")

KIB = 1024
MIB = 1024 * 1024
GIB = 1024 * 1024 * 1024
