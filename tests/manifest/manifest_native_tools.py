"""Python functions an `Ai.Tools` document imports in the tests."""

from __future__ import annotations


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


not_a_function = 42
