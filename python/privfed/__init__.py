"""privfed: private federated learning and analytics, in Rust, for numpy.

Local randomizers (numpy in, numpy out; exact ε computed from the parameters)::

    import numpy as np, privfed
    m = privfed.PrivUnit2(epsilon=4.0, dim=1000)
    x = np.zeros(1000); x[0] = 1.0
    z = m.privatize(x)              # unbiased: E[z] = x
    m.epsilon, m.variance           # 4.0, the exact worst-case E‖z − x‖²

Submodules: :mod:`privfed.accounting` (RDP/PLD accountants, events, calibration),
:mod:`privfed.mvu` (the MVU designer), :mod:`privfed.distributed` (paper 001's Skellam
pipeline: planner, encoder, decoder), :mod:`privfed.secagg` (SecAgg/SecAgg+ client and server
state machines), :mod:`privfed.ddml` (the Draw-and-Discard client step, paper 003),
:mod:`privfed.fl` (the federated-learning simulator), :mod:`privfed.audit` (empirical privacy
auditing: the one-run bound, the one-shot estimate, the canaries of an FL audit),
:mod:`privfed.errors` (the exceptions);
``privfed.flwr`` (the Flower integration) needs the ``flwr`` extra.
Randomness: an OS-seeded AES-256-CTR generator per object; ``seed=`` (an int, 32 bytes or 64 hex
digits) makes runs reproducible and must never be used for a real release.
"""

from . import accounting, audit, ddml, distributed, errors, fl, mvu, secagg
from ._privfed import (
    GRR,
    MVU,
    BitwiseRR,
    CentralGaussian,
    Gaussian,
    Laplace,
    LocalRandomizer,
    PrivUnit2,
    PrivUnitG,
    PrivUnitInf,
    ScalarDP,
    ScalarRelDP,
    Separated,
    __version__,
)
from .errors import (
    ConfigError,
    InfeasibleParameters,
    InvalidDtype,
    InvalidInput,
    InvalidParameter,
    NumericalError,
    PrivacyBudgetExceeded,
    PrivfedError,
    ProtocolAbort,
    ProtocolError,
    TrainingDiverged,
    UnsupportedEvent,
)

__all__ = [
    "__version__",
    "accounting",
    "audit",
    "ddml",
    "distributed",
    "errors",
    "fl",
    "mvu",
    "secagg",
    "LocalRandomizer",
    "PrivUnit2",
    "PrivUnitG",
    "PrivUnitInf",
    "ScalarDP",
    "ScalarRelDP",
    "GRR",
    "BitwiseRR",
    "Separated",
    "Laplace",
    "Gaussian",
    "MVU",
    "CentralGaussian",
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
