# Type stubs of the native module privfed._privfed (crates/privfed-py). The public modules
# (privfed, privfed.accounting, privfed.mvu, ...) re-export these names.
# ---- section: randomizers, accounting, MVU (crates/privfed-py/src/{mechanisms,accounting,mvu}.rs)
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str

Seed = Union[None, int, bytes, str]
FloatArray = Union[npt.NDArray[np.float32], npt.NDArray[np.float64]]
ArrayLike = Union[FloatArray, float, Sequence[float], Sequence[Sequence[float]]]

class LocalRandomizer:
    """Base class of the local randomizers (immutable; exact ε from the parameters)."""

    def privatize(self, x: ArrayLike, *, threads: Optional[int] = None) -> Any:
        """Unbiased privatization of a vector (dim,), a batch (n, dim), or scalars (dim == 1).
        Returns the input's dtype (float32/float64); a Python float for a float input."""
    def variance_at(self, x: ArrayLike) -> float: ...
    @property
    def variance(self) -> float:
        """The exact worst-case E‖M(x) − x‖² over the domain."""
    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def dim(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def parameters(self) -> Dict[str, Any]: ...
    @property
    def domain(self) -> Dict[str, Any]: ...
    def describe(self) -> Dict[str, Any]: ...
    def dp_event(self) -> Any:
        """The privacy event of one release (a privfed.accounting event)."""

class PrivUnit2(LocalRandomizer):
    def __init__(
        self,
        epsilon: float,
        dim: int,
        *,
        parameterization: str = "optimized",
        epsilon0: Optional[float] = None,
        seed: Seed = None,
    ) -> None: ...

class PrivUnitG(LocalRandomizer):
    def __init__(
        self, epsilon: float, dim: int, *, parameterization: str = "optimized", seed: Seed = None
    ) -> None: ...

class PrivUnitInf(LocalRandomizer):
    def __init__(self, epsilon: float, dim: int, *, seed: Seed = None) -> None: ...

class ScalarDP(LocalRandomizer):
    def __init__(
        self, epsilon: float, r_max: float = 1.0, *, k: Optional[int] = None, seed: Seed = None
    ) -> None: ...

class ScalarRelDP(LocalRandomizer):
    def __init__(
        self, epsilon: float, r_max: float, a: float, kappa: float, *, seed: Seed = None
    ) -> None: ...

class GRR(LocalRandomizer):
    def __init__(
        self, epsilon: float, bits: int, lo: float = -1.0, hi: float = 1.0, *, seed: Seed = None
    ) -> None: ...

class BitwiseRR(LocalRandomizer):
    def __init__(
        self, epsilon: float, bits: int, lo: float = -1.0, hi: float = 1.0, *, seed: Seed = None
    ) -> None: ...

class Separated(LocalRandomizer):
    def __init__(
        self,
        epsilon: float,
        dim: int,
        r_max: float = 1.0,
        *,
        magnitude_epsilon: Optional[float] = None,
        seed: Seed = None,
    ) -> None: ...

class Laplace(LocalRandomizer):
    def __init__(
        self,
        epsilon: float,
        dim: int = 1,
        *,
        norm: str = "l2",
        radius: float = 1.0,
        seed: Seed = None,
    ) -> None: ...

class Gaussian(LocalRandomizer):
    def __init__(
        self,
        epsilon: float,
        delta: float,
        dim: int = 1,
        *,
        norm: str = "l2",
        radius: float = 1.0,
        seed: Seed = None,
    ) -> None: ...

class MVU(LocalRandomizer):
    def __init__(
        self,
        epsilon: float,
        bits: int = 3,
        lo: float = -1.0,
        hi: float = 1.0,
        *,
        input_bits: Optional[int] = None,
        output_bits: Optional[int] = None,
        design: Optional[MvuDesign] = None,
        seed: Seed = None,
    ) -> None: ...

class MvuDesign:
    @staticmethod
    def from_json(obj: Union[str, Dict[str, Any]]) -> MvuDesign: ...
    def to_json(self) -> str: ...
    def to_dict(self) -> Dict[str, Any]: ...
    @property
    def report(self) -> Optional[Dict[str, Any]]: ...
    @property
    def input_bits(self) -> int: ...
    @property
    def output_bits(self) -> int: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def constraint_epsilon(self) -> float: ...
    @property
    def constraint(self) -> Dict[str, Any]: ...
    @property
    def p(self) -> npt.NDArray[np.float64]: ...
    @property
    def alphabet(self) -> npt.NDArray[np.float64]: ...
    @property
    def grid_variances(self) -> npt.NDArray[np.float64]: ...

def design_mvu(
    input_bits: int, output_bits: int, epsilon: float, *, constraint: str = "ldp", power: int = 1
) -> MvuDesign: ...

Event = Any  # a privfed.accounting.DpEvent, or its dict

class PrivacyAccountant:
    @property
    def name(self) -> str: ...
    @property
    def neighbouring_relation(self) -> Any: ...
    def supports(self, event: Event) -> bool: ...
    def compose(self, event: Event, count: int = 1) -> PrivacyAccountant: ...
    def get_epsilon(self, target_delta: float) -> float: ...
    def get_delta(self, target_epsilon: float) -> float: ...
    def step(self, *, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None: ...
    def would_exceed(self, budget: Any, event: Optional[Event] = None) -> bool: ...
    @property
    def ledger(self) -> List[Any]: ...
    def as_event(self) -> Any: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Dict[str, Any]) -> None: ...

class RdpAccountant(PrivacyAccountant):
    def __init__(self, orders: Optional[Sequence[float]] = None) -> None: ...
    @property
    def orders(self) -> List[float]: ...
    def get_epsilon_and_optimal_order(self, target_delta: float) -> Tuple[float, float]: ...

class PldAccountant(PrivacyAccountant):
    def __init__(self, value_discretization_interval: Optional[float] = None) -> None: ...

class PureCappedRdpAccountant(PrivacyAccountant):
    def __init__(self) -> None: ...

def get_noise_multiplier(
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    steps: int,
    *,
    accountant: str = "rdp",
) -> float: ...
def get_laplace_scale(
    target_epsilon: float,
    target_delta: float,
    sample_rate: float = 1.0,
    steps: int = 1,
    *,
    accountant: str = "rdp",
) -> float: ...
def get_skellam_variance(
    target_epsilon: float,
    target_delta: float,
    l1_sensitivity: float,
    l2_sensitivity: float,
    sample_rate: float = 1.0,
    steps: int = 1,
    *,
    accountant: str = "rdp",
) -> float: ...
def validate_event(event: Event) -> None: ...

# ---- end of section: randomizers, accounting, MVU
