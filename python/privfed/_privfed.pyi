# Type stubs of the native module privfed._privfed (crates/privfed-py). The public modules
# (privfed, privfed.accounting, privfed.mvu, ...) re-export these names.
# ---- section: randomizers, accounting, MVU (crates/privfed-py/src/{mechanisms,accounting,mvu}.rs)
from __future__ import annotations

import os
from typing import Any, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union, final, overload

from typing_extensions import Self

import numpy as np
import numpy.typing as npt

__version__: str

_Seed = Union[None, int, bytes, str]
_FloatArray = Union[npt.NDArray[np.float32], npt.NDArray[np.float64]]
_ArrayLike = Union[_FloatArray, float, Sequence[float], Sequence[Sequence[float]]]

class LocalRandomizer:
    """Base class of the local randomizers (immutable; exact ε from the parameters)."""

    def privatize(self, x: _ArrayLike, *, threads: Optional[int] = None) -> Any:
        """Unbiased privatization of a vector (dim,), a batch (n, dim), or scalars (dim == 1).
        Returns the input's dtype (float32/float64); a Python float for a float input."""
    def variance_at(self, x: _ArrayLike) -> float: ...
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

@final
class PrivUnit2(LocalRandomizer):
    def __new__(
        cls,
        epsilon: float,
        dim: int,
        *,
        parameterization: str = "optimized",
        epsilon0: Optional[float] = None,
        seed: _Seed = None,
    ) -> Self: ...

@final
class PrivUnitG(LocalRandomizer):
    def __new__(
        cls, epsilon: float, dim: int, *, parameterization: str = "optimized", seed: _Seed = None
    ) -> Self: ...

@final
class PrivUnitInf(LocalRandomizer):
    def __new__(cls, epsilon: float, dim: int, *, seed: _Seed = None) -> Self: ...

@final
class ScalarDP(LocalRandomizer):
    def __new__(
        cls, epsilon: float, r_max: float = 1.0, *, k: Optional[int] = None, seed: _Seed = None
    ) -> Self: ...

@final
class ScalarRelDP(LocalRandomizer):
    def __new__(
        cls, epsilon: float, r_max: float, a: float, kappa: float, *, seed: _Seed = None
    ) -> Self: ...

@final
class GRR(LocalRandomizer):
    def __new__(
        cls, epsilon: float, bits: int, lo: float = -1.0, hi: float = 1.0, *, seed: _Seed = None
    ) -> Self: ...

@final
class BitwiseRR(LocalRandomizer):
    def __new__(
        cls, epsilon: float, bits: int, lo: float = -1.0, hi: float = 1.0, *, seed: _Seed = None
    ) -> Self: ...

@final
class Separated(LocalRandomizer):
    def __new__(
        cls,
        epsilon: float,
        dim: int,
        r_max: float = 1.0,
        *,
        magnitude_epsilon: Optional[float] = None,
        seed: _Seed = None,
    ) -> Self: ...

@final
class Laplace(LocalRandomizer):
    def __new__(
        cls,
        epsilon: float,
        dim: int = 1,
        *,
        norm: str = "l2",
        radius: float = 1.0,
        seed: _Seed = None,
    ) -> Self: ...

@final
class Gaussian(LocalRandomizer):
    def __new__(
        cls,
        epsilon: float,
        delta: float,
        dim: int = 1,
        *,
        norm: str = "l2",
        radius: float = 1.0,
        seed: _Seed = None,
    ) -> Self: ...

@final
class MVU(LocalRandomizer):
    def __new__(
        cls,
        epsilon: float,
        bits: int = 3,
        lo: float = -1.0,
        hi: float = 1.0,
        *,
        input_bits: Optional[int] = None,
        output_bits: Optional[int] = None,
        design: Optional[MvuDesign] = None,
        seed: _Seed = None,
    ) -> Self: ...

@final
class CentralGaussian:
    """Clip each row to ``clip_norm`` (l2), average over ``batch_size``, add Gaussian noise of
    standard deviation ``noise_multiplier * clip_norm / batch_size`` (privfed's generator)."""
    def __new__(
        cls, clip_norm: float, noise_multiplier: float, *, seed: _Seed = None
    ) -> Self: ...
    @property
    def clip_norm(self) -> float: ...
    @property
    def noise_multiplier(self) -> float: ...
    def noise_std(self, batch_size: float) -> float: ...
    def project(self, v: npt.ArrayLike) -> npt.NDArray[np.float64]: ...
    def aggregate(self, updates: npt.ArrayLike, batch_size: float) -> npt.NDArray[np.float64]: ...

@final
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

def design(
    input_bits: int, output_bits: int, epsilon: float, *, constraint: str = "ldp", power: int = 1
) -> MvuDesign: ...
def rdp_report(
    design: MvuDesign,
    orders: Optional[Sequence[float]] = None,
    *,
    dim: Optional[int] = None,
    sensitivity: Optional[float] = None,
) -> Dict[str, Any]:
    """The report of ``privfed mvu rdp --json``."""

_Event = Any  # a privfed.accounting.DpEvent, its dict, or a dp_accounting event
_Relation = Any  # "add_or_remove_one" | "replace_one" | dp_accounting.NeighboringRelation

class PrivacyAccountant:
    @property
    def name(self) -> str: ...
    @property
    def neighbouring_relation(self) -> Any: ...
    def supports(self, event: _Event) -> bool: ...
    def compose(self, event: _Event, count: int = 1) -> PrivacyAccountant: ...
    def get_epsilon(
        self, target_delta: Optional[float] = None, *, delta: Optional[float] = None
    ) -> float: ...
    def get_delta(
        self, target_epsilon: Optional[float] = None, *, epsilon: Optional[float] = None
    ) -> float: ...
    def step(self, *, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None: ...
    def would_exceed(self, budget: Any, event: Optional[_Event] = None) -> bool: ...
    @property
    def ledger(self) -> List[Any]: ...
    @property
    def ledger_runs(self) -> List[Tuple[Any, int]]: ...
    def __len__(self) -> int: ...
    def as_event(self) -> Any: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Dict[str, Any]) -> None: ...

class RdpAccountant(PrivacyAccountant):
    def __new__(
        cls, orders: Optional[Sequence[float]] = None, neighboring_relation: _Relation = None
    ) -> Self: ...
    @property
    def orders(self) -> List[float]: ...
    def get_epsilon_and_optimal_order(self, target_delta: float) -> Tuple[float, float]: ...
    def get_privacy_spent(
        self,
        delta: Optional[float] = None,
        alphas: Optional[Sequence[float]] = None,
        *,
        target_delta: Optional[float] = None,
    ) -> Tuple[float, float]: ...

class PldAccountant(PrivacyAccountant):
    def __new__(
        cls,
        value_discretization_interval: Optional[float] = None,
        *,
        neighboring_relation: _Relation = None,
    ) -> Self: ...

class PureCappedRdpAccountant(PrivacyAccountant):
    def __new__(cls) -> Self: ...

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
def account(
    event: _Event,
    steps: int,
    *,
    accountant: str,
    delta: Optional[float] = None,
    epsilon: Optional[float] = None,
    sampling_rate: float = 1.0,
    value_discretization: Optional[float] = None,
) -> Dict[str, Any]:
    """The report of ``privfed account --json``."""
def calibrate(
    mechanism: str,
    *,
    target_epsilon: float,
    delta: float,
    steps: int,
    accountant: str,
    sampling_rate: float = 1.0,
    l1_sensitivity: Optional[float] = None,
    l2_sensitivity: Optional[float] = None,
) -> Dict[str, Any]:
    """The report of ``privfed calibrate --json``."""
def draw_and_discard_analysis(
    local_epsilon: float, instances: int, updates: int, *, delta_t: Optional[float] = None
) -> Dict[str, Any]:
    """The report of ``privfed analyze ddml --json``."""
def reconstruction_analysis(
    dimension: int,
    threshold: float,
    *,
    epsilon: Optional[float] = None,
    target_bound: Optional[float] = None,
) -> Dict[str, Any]:
    """The report of ``privfed analyze reconstruction --json``."""
def analytic_gaussian_analysis(
    epsilon: float, delta: float, *, sensitivity: float = 1.0
) -> Dict[str, Any]:
    """The report of ``privfed analyze gaussian --json``."""
def epsilon_vs_noise(
    sigmas: Sequence[float],
    *,
    scale: Optional[int] = None,
    clients: Optional[int] = None,
    steps: Optional[int] = None,
    delta: Optional[float] = None,
) -> Dict[str, Any]:
    """The report of ``privfed analyze epsilon-vs-noise --json``."""
def validate_event(event: _Event) -> None: ...
def _randomizer_specs() -> List[Dict[str, Any]]:
    """The randomizer table: name, python_class, variant and params ({name, example})."""

def _dp_event_examples() -> List[str]:
    """One example of every Rust DpEvent variant as its JSON text (the schema drift test's
    fixture)."""

# ---- end of section: randomizers, accounting, MVU

# ---- section: distributed DP, secure aggregation, Draw-and-Discard, FL
# (crates/privfed-py/src/{distributed,secagg,ddml,fl}.rs)

_Floats = npt.ArrayLike
_Ints = npt.ArrayLike
_Path = Union[str, os.PathLike[str]]

# ============================================================================================
# privfed.distributed — distributed DP with the Skellam mechanism (paper 001: Agarwal, Kairouz
# and Liu 2021). Source: crates/privfed-py/src/distributed.rs.
# ============================================================================================

@final
class SkellamPlan:
    """Paper 001's round plan: scale, local/central noise, wrap probability, expected error by
    source, ε. Immutable; from :func:`plan`."""

    @property
    def epsilon(self) -> Optional[float]: ...
    @property
    def delta(self) -> Optional[float]: ...
    @property
    def scale(self) -> float: ...
    @property
    def dim(self) -> int: ...
    @property
    def padded_dim(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def clip(self) -> float: ...
    @property
    def clients(self) -> int: ...
    @property
    def max_contributors(self) -> int: ...
    @property
    def colluding_fraction(self) -> float: ...
    @property
    def colluders(self) -> int: ...
    @property
    def honest_contributors(self) -> int: ...
    @property
    def local_noise_stddev(self) -> float: ...
    @property
    def central_noise_stddev(self) -> float: ...
    @property
    def wrap_probability(self) -> float: ...
    @property
    def share(self) -> Literal["skellam", "ddg"]: ...
    @property
    def params(self) -> Dict[str, Any]:
        """dim, clip, bits, scale, local_noise_stddev, beta, k, padded_dim: what the clients
        need (pass the dict to SkellamEncoder)."""
    def predicted_mse(self, contributors: int) -> Dict[str, float]:
        """E‖x̂ − x̄‖² over `contributors` clients: quantization, noise, wrap, total."""
    def describe(self) -> Dict[str, Any]: ...

def plan(
    dim: int,
    clip: float,
    bits: int,
    clients: int,
    *,
    epsilon: Optional[float] = None,
    delta: Optional[float] = None,
    noise_stddev: Optional[float] = None,
    sampling_rate: float = 1.0,
    rounds: int = 1,
    k: float = 4.0,
    beta: float = 0.6065306597126334,
    share: Literal["skellam", "ddg"] = "skellam",
    max_contributors: Optional[int] = None,
    colluding_fraction: float = 0.0,
) -> SkellamPlan:
    """Plans a round (privfed.distributed.plan). Exactly one of `epsilon` (with `delta`) and
    `noise_stddev`. `beta`: conditional rounding, default e^{-1/2} (paper 001; 0: plain
    rounding). `colluding_fraction` γ ∈ [0, 1) of the cohort may collude with the server: the
    noise and ε are for the honest lower bound ``clients − ⌈γ·max_contributors⌉``. Raises
    InfeasibleParameters naming the knob to move, InvalidParameter when γ leaves no honest
    contributor."""

def rotation_seed(session_id: bytes, round: int) -> bytes:
    """HKDF-SHA256 seed (32 bytes) of the round's randomized Hadamard rotation."""

def check_plan(
    plan: Union[SkellamPlan, Mapping[str, Any]],
    policy: Union[None, str, Mapping[str, Any]] = None,
) -> None:
    """Checks the server's plan against the client's plan policy (default: refuse a plan
    without local noise; "permissive"; or a dict of allow_no_noise, min_local_noise_stddev,
    max_clip). Raises ProtocolAbort naming the rule when it refuses."""

@final
class SkellamEncoder:
    """A client's encoder (paper 001 Alg. 1): clip, scale, rotate, conditional rounding,
    Skellam (or DDG) share, wrap mod 2^bits. OS-seeded noise; `seed=` for experiments."""

    def __new__(
        cls,
        plan: Union[SkellamPlan, Dict[str, Any]],
        rotation_seed: bytes,
        *,
        share: Optional[Literal["skellam", "ddg"]] = None,
        seed: _Seed = None,
    ) -> Self: ...
    @overload
    def encode(
        self, x: _Floats, *, return_stats: Literal[False] = False, threads: Optional[int] = None
    ) -> npt.NDArray[np.uint64]: ...
    @overload
    def encode(
        self, x: _Floats, *, return_stats: Literal[True], threads: Optional[int] = None
    ) -> Tuple[npt.NDArray[np.uint64], Any]: ...
    @property
    def params(self) -> Dict[str, Any]: ...
    @property
    def share(self) -> Literal["skellam", "ddg"]: ...
    @property
    def padded_dim(self) -> int: ...

@final
class ModularSum:
    """A running sum in Z_{2^bits}^length (the in-process stand-in for secure aggregation)."""

    def __new__(cls, bits: int, length: int) -> Self: ...
    def add(self, v: _Ints) -> None:
        """One vector (length,), or each row of (n, length); on error nothing is added."""
    @property
    def value(self) -> npt.NDArray[np.uint64]: ...
    @property
    def contributions(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def length(self) -> int: ...

@final
class Decoded:
    """A decoded round: the private mean and sum, and the wrap report."""

    @property
    def mean(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum(self) -> npt.NDArray[np.float64]: ...
    @property
    def contributors(self) -> int: ...
    @property
    def near_boundary(self) -> int: ...
    @property
    def expected_near_boundary(self) -> float: ...
    @property
    def wrap_suspected(self) -> bool: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class SkellamDecoder:
    """The server's decoder for one round."""

    def __new__(
        cls, plan: Union[SkellamPlan, Dict[str, Any]], rotation_seed: bytes
    ) -> Self: ...
    def decode(self, modular_sum: _Ints, contributors: int) -> Decoded: ...

def honest_contributors(cohort: int, contributors: int, colluding_fraction: float) -> int:
    """The honest lower bound ``contributors − ⌈γ·cohort⌉`` whose noise the accounting counts
    (privfed.distributed.honest_contributors). Raises InvalidParameter for γ outside [0, 1) or
    when the colluders could be every contributor."""

def round_event(plan: Union[SkellamPlan, Dict[str, Any]], contributors: int) -> Any:
    """The round's privfed.accounting event with the clients that actually contributed
    (privfed.distributed.round_event)."""

# ============================================================================================
# privfed.secagg — secure aggregation (Bonawitz et al. 2017; SecAgg+ of Bell et al. 2020).
# Client ids are 1..clients. Source: crates/privfed-py/src/secagg.rs.
# ============================================================================================

@final
class RoundConfig:
    """A round's public parameters (validated, immutable; equality by value)."""

    def to_dict(self) -> Dict[str, Any]: ...
    @staticmethod
    def from_dict(d: Dict[str, Any]) -> RoundConfig: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> RoundConfig: ...
    @property
    def session_id(self) -> bytes: ...
    @property
    def clients(self) -> int: ...
    @property
    def threshold(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def graph(self) -> Literal["complete", "harary"]: ...
    @property
    def degree(self) -> int: ...
    @property
    def binding(self) -> bytes: ...
    @property
    def threat_model(self) -> Literal["honest-but-curious", "active"]: ...
    @property
    def roster(self) -> Optional[bytes]: ...
    def neighbours(self, client_id: int) -> List[int]: ...
    def __getitem__(self, key: str, /) -> Any: ...
    def keys(self) -> List[str]: ...

_Policy = Union[None, str, Mapping[str, Any]]

def check_policy(config: RoundConfig, policy: _Policy = None) -> None:
    """Checks a round against the client's policy (default: n >= 3, t >= 2, t > k/2; or
    "permissive"; or a dict of min_clients, min_threshold, min_threshold_fraction, min_degree,
    accept_honest_but_curious, accept_active_without_roster). Raises ProtocolAbort naming the
    rule, the round's value and the limit when it refuses."""

def round_config(
    clients: int,
    bits: int,
    dim: int,
    *,
    dropout: float = 0.0,
    graph: Literal["auto", "complete", "harary"] = "auto",
    degree: Optional[int] = None,
    threshold: Optional[int] = None,
    session_id: Union[bytes, str, None] = None,
    threat_model: Literal["honest-but-curious", "active"] = "honest-but-curious",
    roster: Optional[Roster] = None,
    colluding_fraction: Optional[float] = None,
) -> RoundConfig:
    """privfed.secagg.round_config: `session_id` fresh from the OS when omitted; an active
    round names `roster` (None: no roster, the Sybil case); thresholds sized for
    `colluding_fraction` (None: 0.1, capped), InvalidParameter when a cohort cannot hold it."""

@final
class DeviceKey:
    """A device's (or an enrollment authority's) Ed25519 signing key; the secret stays in Rust."""

    @staticmethod
    def generate() -> DeviceKey: ...
    @staticmethod
    def load(path: Union[str, os.PathLike[str]], *, create: bool = False) -> DeviceKey: ...
    @property
    def verifying_key(self) -> bytes: ...

@final
class Roster:
    """The enrolled devices' verifying keys, signed by the enrollment authority, with a version
    and an expiry time (`not_after`, Unix seconds; default 30 days from signing)."""

    @staticmethod
    def sign(
        authority: DeviceKey,
        devices: Sequence[bytes],
        *,
        version: int = 1,
        not_after: Optional[int] = None,
    ) -> Roster: ...
    @staticmethod
    def from_bytes(data: bytes) -> Roster: ...
    def to_bytes(self) -> bytes: ...
    def verify(
        self, authority: bytes, *, min_version: int = 0, now: Optional[int] = None
    ) -> None: ...
    @property
    def version(self) -> int: ...
    @property
    def not_after(self) -> int: ...
    @property
    def devices(self) -> List[bytes]: ...
    @property
    def digest(self) -> bytes: ...
    def __len__(self) -> int: ...

def plan_secagg_plus(
    clients: int,
    dropout: float,
    *,
    corrupt: float = 0.1,
    security_bits: float = 40.0,
    correctness_bits: float = 20.0,
) -> Dict[str, Any]:
    """SecAgg+'s degree and threshold (Bell et al. 2020 §4), as `privfed secagg plan --json`."""

@final
class SecAggClient:
    """One client of one round; secrets stay in Rust. `seed=` only for experiments."""

    def __new__(
        cls,
        config: RoundConfig,
        client_id: int,
        *,
        seed: _Seed = None,
        device: Optional[DeviceKey] = None,
        roster: Optional[Roster] = None,
        authority: Optional[bytes] = None,
        policy: _Policy = None,
        min_roster_version: int = 0,
    ) -> Self: ...
    @staticmethod
    def new_sealed(
        config: RoundConfig,
        client_id: int,
        *,
        key_file: _Path,
        aad: bytes,
        device: Optional[DeviceKey] = None,
        roster: Optional[Roster] = None,
        authority: Optional[bytes] = None,
        policy: _Policy = None,
        min_roster_version: int = 0,
    ) -> Tuple[SecAggClient, bytes]:
        """A client from a fresh OS seed drawn in Rust, and that seed sealed
        (nonce ‖ ChaCha20-Poly1305) under the key in `key_file` (created if missing) with `aad`."""
    @staticmethod
    def open_sealed(
        config: RoundConfig,
        client_id: int,
        sealed: bytes,
        *,
        key_file: _Path,
        aad: bytes,
        device: Optional[DeviceKey] = None,
        roster: Optional[Roster] = None,
        authority: Optional[bytes] = None,
        policy: _Policy = None,
        min_roster_version: int = 0,
    ) -> SecAggClient:
        """The client of `new_sealed` from its sealed seed; ProtocolAbort if it does not open."""
    @property
    def advertise_message(self) -> bytes: ...
    def handle(self, server_message: bytes, input: Optional[_Ints] = None) -> bytes:
        """The answer to the server's message; `input` (uint64, length dim) in the
        masked-input stage. ProtocolAbort for an inconsistent request, ProtocolError for bad
        bytes."""
    @property
    def next_stage(
        self,
    ) -> Optional[Literal["share_keys", "masked_input", "consistency_check", "unmasking"]]: ...
    @property
    def aborted(self) -> bool: ...
    @property
    def client_id(self) -> int: ...
    @property
    def config(self) -> RoundConfig: ...

@final
class SecAggServer:
    """The server of one round (no clock: the caller closes stages)."""

    def __new__(cls, config: RoundConfig) -> Self: ...
    def receive(self, client_message: bytes) -> Literal["accepted", "duplicate"]: ...
    def message_for(self, client_id: int) -> bytes: ...
    def close_stage(self) -> Literal["collecting", "finished", "aborted"]: ...
    @property
    def status(self) -> Literal["collecting", "finished", "aborted"]: ...
    @property
    def stage(
        self,
    ) -> Optional[
        Literal["advertise_keys", "share_keys", "masked_input", "consistency_check", "unmasking"]
    ]: ...
    @property
    def abort_reason(self) -> Optional[str]: ...
    @property
    def pending(self) -> List[int]: ...
    @property
    def output(self) -> Optional[Dict[str, Any]]:
        """{"sum": uint64 array, "survivors": [...], "dropped": [...], "rejected_shares": [...]}
        (senders of a wrong Shamir share, traced and excluded); None while collecting;
        raises ProtocolAbort if the round aborted."""
    @property
    def config(self) -> RoundConfig: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> SecAggServer: ...

def decode_message(data: bytes, *, sender: Literal["server", "client"]) -> Dict[str, Any]:
    """A wire message as a dict (privfed.secagg.decode_message)."""

def encode_message(
    message: Dict[str, Any], *, sender: Literal["server", "client"]
) -> bytes:
    """The wire bytes of a message dict (privfed.secagg.encode_message)."""

def simulate(
    clients: int,
    dim: int,
    bits: int = 32,
    dropout: float = 0.0,
    *,
    dropout_stage: Literal[
        "advertise_keys", "share_keys", "masked_input", "consistency_check", "unmasking", "random"
    ] = "masked_input",
    graph: Literal["auto", "complete", "harary"] = "auto",
    degree: Optional[int] = None,
    threshold: Optional[int] = None,
    seed: Optional[int] = None,
    threat_model: Literal["active", "honest-but-curious"] = "active",
    policy: _Policy = None,
) -> Dict[str, Any]:
    """One in-process round; the report of `privfed secagg simulate --json`
    (privfed.secagg.simulate); `policy` as `SecAggClient`'s."""

# ============================================================================================
# privfed.ddml — the Draw-and-Discard client step (paper 003 Alg. 1).
# Source: crates/privfed-py/src/ddml.rs.
# ============================================================================================

@final
class ClientStep:
    """B' = B − γ·clip(G) + noise (Laplace for ε-DP, Gaussian for (ε, δ)-DP, or none)."""

    def __new__(
        cls,
        learning_rate: float,
        num_weights: int,
        *,
        noise: Literal["laplace", "gaussian", "none"] = "laplace",
        epsilon: Optional[float] = None,
        delta: Optional[float] = None,
        unit: Literal["feature", "model"] = "feature",
        seed: _Seed = None,
    ) -> Self: ...
    def privatize_step(self, model: _Floats, gradient: _Floats) -> npt.NDArray[np.floating]: ...
    def apply(
        self,
        model: _Floats,
        x: _Floats,
        y: _Floats,
        *,
        glm: Literal["logistic", "linear", "softmax"] = "logistic",
    ) -> npt.NDArray[np.floating]: ...
    @property
    def learning_rate(self) -> float: ...
    @property
    def num_weights(self) -> int: ...
    @property
    def unit(self) -> Literal["feature", "model"]: ...
    @property
    def noise(self) -> Dict[str, Any]: ...
    @property
    def noise_scale(self) -> float: ...
    @property
    def noise_variance(self) -> float: ...
    @property
    def guarantee(self) -> Optional[Dict[str, Any]]: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> float: ...
    def to_dict(self) -> Dict[str, Any]: ...

def encode_weights(weights: _Floats) -> bytes:
    """Little-endian float32 bytes (privfed.ddml.encode_weights)."""

def decode_weights(data: bytes) -> npt.NDArray[np.float32]:
    """privfed.ddml.decode_weights."""

def simulate_in_process(
    dataset: str,
    *,
    k: int,
    learning_rate: float,
    epsilon: Optional[float],
    passes: Optional[int] = None,
    examples_per_client: Optional[int] = None,
    strategy: Optional[str] = None,
    server_batch: Optional[int] = None,
    spam_sigmas: Optional[float] = None,
    synthetic_train: Optional[int] = None,
    synthetic_test: Optional[int] = None,
    seed: Optional[int] = None,
    data_dir: Optional[_Path] = None,
) -> Dict[str, Any]:
    """The report of ``privfed ddml simulate --json`` (privfed.ddml.simulate_in_process)."""

# ============================================================================================
# privfed.fl — the FL simulator and its models. Source: crates/privfed-py/src/fl.rs.
# ============================================================================================

_Config = Union[str, os.PathLike[str], Dict[str, Any]]

def train(
    config: _Config,
    *,
    data_dir: Optional[_Path] = None,
    out_dir: Optional[_Path] = None,
    checkpoint: Optional[_Path] = None,
    fresh: bool = False,
    max_rounds: Optional[int] = None,
    threads: Optional[int] = None,
    progress: bool = True,
) -> Dict[str, Any]:
    """One run as `privfed fl train --json` (privfed.fl.train)."""

@final
class Trainer:
    """A run a round at a time over data it owns."""

    def __new__(
        cls, config: _Config, *, data_dir: Optional[_Path] = None, threads: Optional[int] = None
    ) -> Self: ...
    @staticmethod
    def resume(
        checkpoint: Union[_Path, bytes],
        config: _Config,
        *,
        data_dir: Optional[_Path] = None,
        threads: Optional[int] = None,
    ) -> Trainer: ...
    def step(self) -> Optional[Dict[str, Any]]:
        """One round's record, None when finished; PrivacyBudgetExceeded on a budget stop,
        TrainingDiverged when training diverges."""
    def run(
        self,
        rounds: Optional[int] = None,
        *,
        progress: bool = False,
        checkpoint: Optional[_Path] = None,
    ) -> Dict[str, Any]: ...
    def summary(self) -> Dict[str, Any]: ...
    def checkpoint(self) -> bytes: ...
    def save_checkpoint(self, path: _Path) -> None: ...
    @property
    def params(self) -> npt.NDArray[np.float32]: ...
    @property
    def round(self) -> int: ...
    @property
    def rounds(self) -> int: ...
    @property
    def finished(self) -> bool: ...
    @property
    def epsilon(self) -> Optional[float]: ...
    @property
    def history(self) -> List[Dict[str, Any]]: ...
    @property
    def events(self) -> List[Any]: ...
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def clients(self) -> int: ...

@final
class Model:
    """One of the simulator's models over flat float32 parameters (spec: the [model] table)."""

    def __new__(cls, spec: Union[Dict[str, Any], str]) -> Self: ...
    @property
    def num_params(self) -> int: ...
    @property
    def spec(self) -> Dict[str, Any]: ...
    def init(self, seed: _Seed = None) -> npt.NDArray[np.float32]: ...
    def loss_grad(
        self, params: _Floats, x: npt.ArrayLike, y: _Ints
    ) -> Tuple[float, npt.NDArray[np.float32]]: ...
    def evaluate(self, params: _Floats, x: npt.ArrayLike, y: _Ints) -> Tuple[float, int, int]: ...
    def local_sgd(
        self,
        params: _Floats,
        x: npt.ArrayLike,
        y: _Ints,
        *,
        epochs: int = 1,
        batch_size: int = 10,
        learning_rate: float = 0.05,
        proximal: float = 0.0,
        max_steps: Optional[int] = None,
        seed: _Seed = None,
        return_loss: bool = False,
    ) -> Any:
        """New params (float32), or (params, mean_loss) with return_loss=True."""

# ---- end of section: distributed DP, secure aggregation, Draw-and-Discard, FL

# ============================================================================================
# privfed.audit — empirical privacy auditing and the canaries of an FL audit.
# Source: crates/privfed-py/src/audit.rs.
# ============================================================================================

def epsilon_lower_bound(
    canaries: int, guesses: int, correct: int, delta: float, confidence: float = 0.95
) -> float: ...
def one_run_p_value(
    canaries: int, guesses: int, correct: int, epsilon: float, delta: float
) -> float: ...
def guesses(
    scores: _Floats, included: Sequence[bool], k_plus: int, k_minus: int
) -> Tuple[int, int]: ...
def cosine(canary: _Floats, model_delta: _Floats) -> float: ...
def one_shot_epsilon(included: _Floats, excluded: _Floats, delta: float) -> Dict[str, float]: ...
def clopper_pearson(
    successes: int, trials: int, confidence: float = 0.95, *, two_sided: bool = False
) -> Tuple[float, float]: ...
def gdp_epsilon(mu: float, delta: float) -> float: ...
def gdp_mu_from_tradeoff(fpr: float, fnr: float) -> float: ...
def canary_directions(
    seed: Union[int, bytes, str], canaries: int, dim: int
) -> npt.NDArray[np.float64]: ...
@final
class CanarySet:
    """The canaries of a federated-learning audit and its per-round audit."""

    def __new__(
        cls,
        canaries: int,
        dim: int,
        *,
        seed: _Seed = None,
        delta: float = 1e-5,
        confidence: float = 0.95,
        guesses: Optional[int] = None,
        norm: Optional[float] = None,
        clip_norm: Optional[float] = None,
        noise_multiplier: Optional[float] = None,
    ) -> Self: ...
    @property
    def canaries(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def included(self) -> List[bool]: ...
    @property
    def directions(self) -> npt.NDArray[np.float64]: ...
    def norm_for_round(
        self, largest_update: Optional[float] = None, previous: Optional[float] = None
    ) -> float: ...
    def audit(self, model_delta: _Floats, norm: float, rounds: int) -> Dict[str, Any]: ...
    def summary(self, last: Optional[Dict[str, Any]] = None) -> Dict[str, Any]: ...

