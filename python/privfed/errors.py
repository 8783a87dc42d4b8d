"""The exceptions privfed raises (mapped from the Rust library's typed errors).

Every error derives from :class:`PrivfedError`; those about bad arguments are also
``ValueError`` (or ``TypeError`` for a wrong dtype), so ordinary handlers catch them too.
"""

from __future__ import annotations

__all__ = [
    "PrivfedError",
    "InvalidParameter",
    "InvalidInput",
    "InvalidDtype",
    "InfeasibleParameters",
    "UnsupportedEvent",
    "PrivacyBudgetExceeded",
    "TrainingDiverged",
    "ProtocolError",
    "ProtocolAbort",
    "NumericalError",
    "ConfigError",
]


class PrivfedError(Exception):
    """Base class of every privfed error."""


class InvalidParameter(PrivfedError, ValueError):
    """A parameter is outside its valid range (the message names it and its value)."""


class InvalidInput(PrivfedError, ValueError):
    """An input of the wrong shape, not finite, not C-contiguous, or outside the domain."""


class InvalidDtype(PrivfedError, TypeError):
    """An array of a dtype privfed does not take (it takes float32 and float64)."""


class InfeasibleParameters(PrivfedError, ValueError):
    """No parameters meet the request (e.g. a noise target a planner cannot reach)."""


class UnsupportedEvent(PrivfedError, ValueError):
    """The accountant cannot compose this kind of privacy event."""


class PrivacyBudgetExceeded(PrivfedError):
    """Going on would spend more privacy than the budget allows."""


class TrainingDiverged(PrivfedError, ArithmeticError):
    """A training run diverged: a client's local update or the server's step was not finite
    (the learning rates, momentum or clip cannot train this model under its noise)."""


class ProtocolError(PrivfedError, ValueError):
    """A secure-aggregation message that is malformed, forged, replayed or out of order."""


class ProtocolAbort(PrivfedError):
    """A secure-aggregation round aborted (too few survivors, or an inconsistent request
    from the server that an honest client refuses)."""


class NumericalError(PrivfedError, ArithmeticError):
    """A numerical routine could not reach its accuracy."""


class ConfigError(PrivfedError, ValueError):
    """A run configuration or data set that cannot be used."""
