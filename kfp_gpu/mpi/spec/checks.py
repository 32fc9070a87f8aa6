"""Small validators shared by the option groups: each raises ValueError naming the field
and what is accepted."""

from __future__ import annotations

from collections.abc import Sequence


def positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def optional_non_negative(name: str, value, what: str = "integer") -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                              or value < 0):
        raise ValueError(f"{name} must be a non-negative {what} or None, got {value!r}")


def choice(name: str, value, accepted: Sequence[str]) -> None:
    """Raise ``ValueError`` naming ``accepted`` unless ``value`` is one of them."""
    if value not in accepted:
        shown = ", ".join(repr(a) for a in accepted)
        raise ValueError(f"invalid {name} {value!r}; accepted: {shown}")


def argv(name: str, value, example: str) -> None:
    if isinstance(value, str) or not value or not all(isinstance(a, str) and a for a in value):
        raise ValueError(f"{name} must be a non-empty sequence of non-empty strings (argv), "
                         f"e.g. {example}")
