//! Secure aggregation (Bonawitz et al. 2017; SecAgg+ of Bell et al. 2020; `privfed_secagg`):
//! the round configuration and planner, the client and server state machines with messages as
//! `bytes` in the crate's own wire encoding (`messages::encode` / `decode`), and an in-process
//! simulation — re-exported by `privfed.secagg`.
//!
//! Client ids are `1..=clients` (0 is Shamir's secret point, never an id); an integration with
//! its own node ids (Flower) maps them onto `1..=clients`. The protocol's secrets (X25519 keys,
//! self-mask seeds, shares) never leave Rust: Python only ever holds public keys, ciphertexts,
//! masked vectors and, in the last stage, the shares the server is meant to receive.

use crate::errors::{Kind, PyResultExt, error, invalid};
use crate::intarrays::{read_u64_vector, write_u64};
use crate::json::{from_python, to_python};
use crate::rng::{hex_key, os_key, rng_from_seed};
use privfed_mechanisms::rng::NoiseRng;
use privfed_secagg::local::SecAggThreat;
use privfed_secagg::messages::{decode, encode};
use privfed_secagg::{
    Client, ClientMessage, ClientPolicy, Credentials, DeviceKey as DeviceKeyRs, GraphChoice,
    GraphSpec, Receipt, Roster as RosterRs, RosterCheck, RoundConfig as ConfigRs, RoundStatus,
    Server, ServerMessage, Stage, ThreatModel,
};
use privfed_sim::secagg::{SecAggSimConfig, simulate_in_process};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rand::SeedableRng;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A session id: 32 bytes or 64 hex digits; `None`: 256 fresh bits from the OS.
fn session_id(obj: Option<&Bound<'_, PyAny>>) -> PyResult<[u8; 32]> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(*os_key()?);
    };
    if let Ok(b) = obj.cast::<PyBytes>() {
        return b.as_bytes().try_into().map_err(|_| {
            invalid(
                "session_id",
                format!("expected 32 bytes, got {}", b.as_bytes().len()),
            )
        });
    }
    if let Ok(s) = obj.extract::<String>() {
        return hex_key(&s)
            .ok_or_else(|| invalid("session_id", format!("expected 64 hex digits, got {s:?}")));
    }
    Err(invalid("session_id", "expected 32 bytes or 64 hex digits"))
}

fn stage_name(s: Option<Stage>) -> Option<&'static str> {
    s.map(Stage::name)
}

fn stage_from_str(s: &str) -> PyResult<Option<Stage>> {
    Ok(Some(match s {
        "advertise_keys" | "advertise" => Stage::AdvertiseKeys,
        "share_keys" | "share" => Stage::ShareKeys,
        "masked_input" | "masked" => Stage::MaskedInput,
        "consistency_check" | "consistency" => Stage::ConsistencyCheck,
        "unmasking" | "unmask" => Stage::Unmasking,
        "random" => return Ok(None),
        other => {
            return Err(invalid(
                "dropout_stage",
                format!(
                    "expected \"advertise_keys\", \"share_keys\", \"masked_input\", \"consistency_check\", \
                     \"unmasking\" or \"random\", got {other:?}"
                ),
            ));
        }
    }))
}

fn graph_choice(graph: &str, degree: Option<u32>, threshold: Option<u32>) -> PyResult<GraphChoice> {
    match (graph, degree, threshold) {
        ("harary", Some(degree), Some(threshold)) => Ok(GraphChoice::Harary { degree, threshold }),
        ("harary", None, None) | ("plus", None, None) => Ok(GraphChoice::Plus),
        ("harary", _, _) => Err(invalid(
            "degree",
            "graph=\"harary\" takes both degree and threshold (or neither: planned SecAgg+)",
        )),
        (_, Some(_), _) | (_, _, Some(_)) => Err(invalid(
            "degree",
            "degree and threshold apply to graph=\"harary\" only",
        )),
        ("auto", ..) => Ok(GraphChoice::Auto),
        ("complete", ..) => Ok(GraphChoice::Complete),
        (other, ..) => Err(invalid(
            "graph",
            format!("expected \"auto\", \"complete\" or \"harary\", got {other:?}"),
        )),
    }
}

/// The public parameters of one round: session id, clients `1..=clients`, threshold, the ring
/// `Z_{2^bits}`, the vector length and the graph. Validated; immutable; every message is bound
/// to its digest. `to_dict()` / `RoundConfig.from_dict()` and `to_bytes()` /
/// `RoundConfig.from_bytes()` carry it to the clients.
#[pyclass(frozen, eq, module = "privfed.secagg", name = "RoundConfig")]
#[derive(PartialEq)]
pub struct RoundConfig {
    inner: ConfigRs,
}

impl RoundConfig {
    fn checked(inner: ConfigRs) -> PyResult<Self> {
        inner.validate().py()?;
        Ok(Self { inner })
    }

    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.inner;
        let d = PyDict::new(py);
        d.set_item("session_id", hex(&c.session_id))?;
        d.set_item("clients", c.clients)?;
        d.set_item("threshold", c.threshold)?;
        d.set_item("bits", c.bits)?;
        d.set_item("dim", c.dim)?;
        d.set_item("graph", self.graph())?;
        d.set_item("degree", c.degree())?;
        d.set_item("threat_model", c.threat_model.name())?;
        d.set_item("roster", roster_digest(&c.threat_model).map(|r| hex(&r)))?;
        Ok(d)
    }
}

fn roster_digest(t: &ThreatModel) -> Option<[u8; 32]> {
    match t {
        ThreatModel::Active { roster } => *roster,
        ThreatModel::HonestButCurious => None,
    }
}

/// The threat model a caller names: `"honest-but-curious"`, or `"active"` with the roster's
/// digest (`None`: a round without a roster, which a client holding one refuses).
fn threat_model(name: &str, roster: Option<[u8; 32]>) -> PyResult<ThreatModel> {
    match name {
        "honest-but-curious" if roster.is_some() => Err(invalid(
            "roster",
            "a roster applies to threat_model=\"active\" only",
        )),
        "honest-but-curious" => Ok(ThreatModel::HonestButCurious),
        "active" => Ok(ThreatModel::Active { roster }),
        other => Err(invalid(
            "threat_model",
            format!("expected \"active\" or \"honest-but-curious\", got {other:?}"),
        )),
    }
}

/// The form `to_dict` writes and `from_dict` reads.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigDict {
    session_id: String,
    clients: u32,
    threshold: u32,
    bits: u32,
    dim: usize,
    graph: String,
    degree: Option<u32>,
    #[serde(default)]
    threat_model: Option<String>,
    #[serde(default)]
    roster: Option<String>,
}

#[pymethods]
impl RoundConfig {
    /// The dict form: `session_id` (64 hex digits), `clients`, `threshold`, `bits`, `dim`,
    /// `graph` (`"complete"` or `"harary"`), `degree` (neighbours per client), `threat_model`
    /// (`"honest-but-curious"` or `"active"`) and `roster` (the active round's roster digest,
    /// 64 hex digits, or `None`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.dict(py)
    }

    /// A configuration from its dict form (validated).
    #[staticmethod]
    fn from_dict(d: &Bound<'_, PyAny>) -> PyResult<Self> {
        let c: ConfigDict = from_python(d, "round configuration", Kind::InvalidParameter)?;
        let session_id = hex_key(&c.session_id).ok_or_else(|| {
            invalid(
                "session_id",
                format!("expected 64 hex digits, got {:?}", c.session_id),
            )
        })?;
        let graph = match (c.graph.as_str(), c.degree) {
            ("complete", _) => GraphSpec::Complete,
            ("harary", Some(degree)) => GraphSpec::Harary { degree },
            ("harary", None) => return Err(invalid("degree", "a harary graph needs its degree")),
            (other, _) => {
                return Err(invalid(
                    "graph",
                    format!("expected \"complete\" or \"harary\", got {other:?}"),
                ));
            }
        };
        let roster =
            match &c.roster {
                None => None,
                Some(h) => Some(hex_key(h).ok_or_else(|| {
                    invalid("roster", format!("expected 64 hex digits, got {h:?}"))
                })?),
            };
        let threat_model = threat_model(
            c.threat_model.as_deref().unwrap_or("honest-but-curious"),
            roster,
        )?;
        let inner = ConfigRs {
            session_id,
            clients: c.clients,
            threshold: c.threshold,
            bits: c.bits,
            dim: c.dim,
            graph,
            threat_model,
        };
        if graph == GraphSpec::Complete && c.degree.is_some_and(|k| k != inner.degree()) {
            return Err(invalid(
                "degree",
                format!(
                    "the complete graph on {} clients has degree {}",
                    c.clients,
                    inner.degree()
                ),
            ));
        }
        Self::checked(inner)
    }

    /// The configuration in the protocol's wire encoding (postcard).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &encode(&self.inner))
    }

    /// A configuration from `to_bytes()` (validated; malformed bytes are a `ProtocolError`).
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Self::checked(decode::<ConfigRs>(data).py()?)
    }

    /// The 32-byte session id.
    #[getter]
    fn session_id<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.session_id)
    }
    /// Clients, numbered `1..=clients`.
    #[getter]
    fn clients(&self) -> u32 {
        self.inner.clients
    }
    /// Shares needed to reconstruct a client's secret (more than half its neighbours).
    #[getter]
    fn threshold(&self) -> u32 {
        self.inner.threshold
    }
    /// The ring is `Z_{2^bits}`.
    #[getter]
    fn bits(&self) -> u32 {
        self.inner.bits
    }
    /// Length of every input vector.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim
    }
    /// `"complete"` (Bonawitz et al. 2017) or `"harary"` (SecAgg+, Bell et al. 2020).
    #[getter]
    fn graph(&self) -> &'static str {
        match self.inner.graph {
            GraphSpec::Complete => "complete",
            GraphSpec::Harary { .. } => "harary",
        }
    }
    /// Neighbours per client.
    #[getter]
    fn degree(&self) -> u32 {
        self.inner.degree()
    }
    /// SHA-256 of the protocol version and every parameter (in every message header).
    #[getter]
    fn binding<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.binding())
    }
    /// `"honest-but-curious"` or `"active"` (signed keys, consistency round; docs/SECURE_AGGREGATION.md).
    #[getter]
    fn threat_model(&self) -> &'static str {
        self.inner.threat_model.name()
    }
    /// The digest of the roster an active round names (`Roster.digest`), or `None`.
    #[getter]
    fn roster<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        roster_digest(&self.inner.threat_model).map(|r| PyBytes::new(py, &r))
    }
    /// The neighbours of client `client_id` (increasing ids). In the active mode the SecAgg+
    /// graph is placed after round 1 from the key list, so this is the honest-but-curious
    /// placement.
    fn neighbours(&self, client_id: u32) -> PyResult<Vec<u32>> {
        let g = self.inner.validate().py()?;
        if !g.contains(client_id) {
            return Err(invalid(
                "client_id",
                format!("must be in 1..={}", self.inner.clients),
            ));
        }
        Ok(g.neighbours(client_id))
    }
    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)?
            .get_item(key)?
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(key.to_string()))
    }
    /// The names `config[name]` accepts (the keys of the config as a dict).
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        Ok(self.dict(py)?.keys())
    }
    fn __repr__(&self) -> String {
        let c = &self.inner;
        format!(
            "<RoundConfig clients={} threshold={} bits={} dim={} graph={} degree={} threat_model={}>",
            c.clients,
            c.threshold,
            c.bits,
            c.dim,
            self.graph(),
            c.degree(),
            c.threat_model.name()
        )
    }
}

/// A validated round configuration for `clients` expecting a fraction `dropout` to drop:
/// `graph="auto"` (complete up to 128 clients, planned SecAgg+ above), `"complete"` (threshold
/// ⌊(n−1)/2⌋ + 1), `"harary"` (SecAgg+ planned for `dropout` and a 10% corrupted fraction, or
/// exactly `degree` and `threshold` when both are given). `session_id`: 32 bytes or 64 hex
/// digits, fresh from the OS when omitted (it must be fresh for every round).
/// `threat_model="active"` makes an actively secure round (signed keys, a consistency round, the
/// active planner's thresholds: on the complete graph `⌊(n + ⌈0.1·n⌉)/2⌋ + 1`) naming `roster`
/// (a `Roster`; `None`: no roster, so the server can join as any number of clients — a client
/// that holds a roster refuses such a round); the default is `"honest-but-curious"`.
/// `colluding_fraction` γ: the thresholds are sized for that fraction of colluding clients
/// (the active complete graph's `⌊(n + ⌈γn⌉)/2⌋ + 1`, SecAgg+ planned with `corrupt=γ`) — the
/// γ the distributed-DP plan's accounting assumes; a γ the cohort cannot be sized for raises
/// `InvalidParameter` naming `colluding_fraction`. `None` (the default) sizes for 0.1 and caps
/// the complete graph's threshold at `n − 1`.
#[pyfunction]
#[pyo3(name = "round_config", signature = (clients, bits, dim, *, dropout=0.0, graph="auto", degree=None, threshold=None, session_id=None, threat_model="honest-but-curious", roster=None, colluding_fraction=None))]
#[allow(clippy::too_many_arguments)]
fn secagg_round_config(
    clients: u32,
    bits: u32,
    dim: usize,
    dropout: f64,
    graph: &str,
    degree: Option<u32>,
    threshold: Option<u32>,
    session_id: Option<&Bound<'_, PyAny>>,
    threat_model: &str,
    roster: Option<PyRef<'_, Roster>>,
    colluding_fraction: Option<f64>,
) -> PyResult<RoundConfig> {
    let choice = graph_choice(graph, degree, threshold)?;
    let sid = self::session_id(session_id)?;
    let tm = self::threat_model(threat_model, roster.map(|r| r.inner.digest()))?;
    let inner = match colluding_fraction {
        None => privfed_secagg::round_config_for(tm, clients, bits, dim, dropout, choice, sid),
        Some(gamma) => privfed_secagg::round_config_for_colluding(
            tm, clients, bits, dim, dropout, choice, sid, gamma,
        ),
    }
    .py()?;
    Ok(RoundConfig { inner })
}

/// Reads a 32-byte secret from `path`; on Unix a file that group or others can access is
/// refused.
fn read_secret(path: &Path) -> PyResult<Zeroizing<[u8; 32]>> {
    let os = |e: std::io::Error| {
        pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", path.display()))
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).map_err(os)?.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(invalid(
                "path",
                format!(
                    "{}: a secret key file must be private to its owner (mode {:o}); chmod 600 it",
                    path.display(),
                    mode & 0o777
                ),
            ));
        }
    }
    let bytes = Zeroizing::new(std::fs::read(path).map_err(os)?);
    let mut key = Zeroizing::new([0u8; 32]);
    if bytes.len() != 32 {
        return Err(invalid(
            "path",
            format!(
                "{}: expected 32 bytes, found {}",
                path.display(),
                bytes.len()
            ),
        ));
    }
    key.copy_from_slice(&bytes);
    Ok(key)
}

/// Stores a fresh 32-byte secret at `path` unless a file is there (mode 0600, written to a
/// temporary file and linked into place, so two processes never store two keys).
fn create_secret(path: &Path) -> PyResult<()> {
    use std::io::Write;
    let os = |e: std::io::Error| {
        pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", path.display()))
    };
    if path.exists() {
        return Ok(());
    }
    let secret = os_key()?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let written = (|| {
        let mut f = opts.open(&tmp)?;
        f.write_all(secret.as_ref())?;
        f.sync_all()
    })();
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    });
    let _ = std::fs::remove_file(&tmp);
    linked.map_err(os)
}

/// A device's long-term Ed25519 signing key for the active mode (Bonawitz et al. 2017 §4): it
/// signs the device's round keys. The secret stays in Rust and is zeroized; only the 32-byte
/// verifying key (`verifying_key`, what an enrollment authority puts on the `Roster`) leaves it.
/// The same class holds an enrollment authority's key, which signs rosters and must be kept
/// apart from the aggregation server.
#[pyclass(frozen, module = "privfed.secagg", name = "DeviceKey")]
pub struct DeviceKey {
    inner: DeviceKeyRs,
}

#[pymethods]
impl DeviceKey {
    /// A fresh key from the OS CSPRNG, in memory only.
    #[staticmethod]
    fn generate() -> PyResult<Self> {
        Ok(Self {
            inner: DeviceKeyRs::from_seed(&*os_key()?),
        })
    }

    /// The key stored at `path` (its 32-byte secret seed; on Unix refused if group or others
    /// can access the file). With `create=True` a missing file is first made from the OS
    /// CSPRNG (mode 0600; an existing file is never overwritten).
    #[staticmethod]
    #[pyo3(signature = (path, *, create=false))]
    fn load(path: PathBuf, create: bool) -> PyResult<Self> {
        if create {
            create_secret(&path)?;
        }
        let seed = read_secret(&path)?;
        Ok(Self {
            inner: DeviceKeyRs::from_seed(&seed),
        })
    }

    /// The public half (32 bytes), as enrolled on a roster.
    #[getter]
    fn verifying_key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.verifying_key())
    }

    fn __repr__(&self) -> String {
        format!(
            "<DeviceKey verifying_key={}…>",
            &hex(&self.inner.verifying_key())[..16]
        )
    }
}

fn key32(b: &[u8], what: &str) -> PyResult<[u8; 32]> {
    b.try_into()
        .map_err(|_| invalid(what, format!("expected 32 bytes, got {}", b.len())))
}

/// The enrolled devices' verifying keys, signed by an enrollment authority (a key that is not
/// the aggregation server's), with a version and an expiry time. An active round names its
/// `digest`; a client accepts it only with the authority's valid signature, not expired by its
/// clock and not older than the newest version it accepted before (`SecAggClient(..., roster=,
/// authority=, min_roster_version=)`). Its wire form is `to_bytes()` / `Roster.from_bytes()`.
#[pyclass(frozen, eq, module = "privfed.secagg", name = "Roster")]
#[derive(PartialEq)]
pub struct Roster {
    inner: RosterRs,
}

/// How long a roster signed without `not_after=` stays valid: 30 days.
const DEFAULT_ROSTER_LIFETIME_SECS: u64 = 30 * 24 * 3600;

/// This machine's clock, seconds since the Unix epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The check of a roster on this device: `now` (default: the clock) and the lowest version it
/// accepts.
fn roster_check(now: Option<u64>, min_version: u64) -> RosterCheck {
    RosterCheck {
        now: now.unwrap_or_else(unix_now),
        min_version,
    }
}

#[pymethods]
impl Roster {
    /// The `authority` signs `devices` (32-byte verifying keys; sorted and deduplicated) as
    /// roster `version` (give each new roster a higher one), valid until `not_after` (seconds
    /// since the Unix epoch; default: 30 days from now).
    #[staticmethod]
    #[pyo3(signature = (authority, devices, *, version=1, not_after=None))]
    fn sign(
        authority: PyRef<'_, DeviceKey>,
        devices: Vec<Vec<u8>>,
        version: u64,
        not_after: Option<u64>,
    ) -> PyResult<Self> {
        let devices = devices
            .iter()
            .map(|d| key32(d, "devices"))
            .collect::<PyResult<Vec<_>>>()?;
        let not_after =
            not_after.unwrap_or_else(|| unix_now().saturating_add(DEFAULT_ROSTER_LIFETIME_SECS));
        Ok(Self {
            inner: RosterRs::sign(&authority.inner, devices, version, not_after),
        })
    }

    /// A roster from `to_bytes()` (its signature is checked by `verify` and by the client).
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: decode::<RosterRs>(data).py()?,
        })
    }

    /// The roster in the protocol's wire encoding.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &encode(&self.inner))
    }

    /// Raises `ProtocolAbort` unless `authority` (its 32-byte verifying key) signed this
    /// roster, sorted and without repeats, it has not expired at `now` (default: this machine's
    /// clock) and its version is at least `min_version`.
    #[pyo3(signature = (authority, *, min_version=0, now=None))]
    fn verify(&self, authority: &[u8], min_version: u64, now: Option<u64>) -> PyResult<()> {
        self.inner
            .clone()
            .verify(
                &key32(authority, "authority")?,
                roster_check(now, min_version),
            )
            .py()?;
        Ok(())
    }

    /// The roster's version.
    #[getter]
    fn version(&self) -> u64 {
        self.inner.version
    }

    /// The last moment the roster is valid, seconds since the Unix epoch.
    #[getter]
    fn not_after(&self) -> u64 {
        self.inner.not_after
    }

    /// The enrolled devices' verifying keys, sorted.
    #[getter]
    fn devices<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        self.inner
            .devices
            .iter()
            .map(|d| PyBytes::new(py, d))
            .collect()
    }

    /// SHA-256 of the signed roster: what an active `RoundConfig` names (`config.roster`).
    #[getter]
    fn digest<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.digest())
    }

    fn __len__(&self) -> usize {
        self.inner.devices.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<Roster version={} devices={} digest={}…>",
            self.inner.version,
            self.inner.devices.len(),
            &hex(&self.inner.digest())[..16]
        )
    }
}

/// SecAgg+'s degree and threshold for a cohort (Bell et al. 2020 §4): the smallest even degree
/// (then threshold) with `n·P[colluders hold both kinds of share of a client] ≤ 2^-security_bits` and
/// `n·P[round cannot finish] ≤ 2^-correctness_bits`, given `dropout` and a `corrupt` fraction
/// colluding with the server. A dict: `graph`, `degree`, `threshold`, `security_log2`,
/// `correctness_log2` (as `privfed secagg plan --threat-model honest-but-curious --json`). This
/// is the honest-but-curious planner: its bound does not cover a server that lies about dropouts.
#[pyfunction]
#[pyo3(signature = (clients, dropout, *, corrupt=0.1, security_bits=40.0, correctness_bits=20.0))]
fn plan_secagg_plus<'py>(
    py: Python<'py>,
    clients: u32,
    dropout: f64,
    corrupt: f64,
    security_bits: f64,
    correctness_bits: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let p = privfed_secagg::plan_secagg_plus(
        clients,
        dropout,
        corrupt,
        security_bits,
        correctness_bits,
    )
    .py()?;
    to_python(py, &p)
}

/// One client's side of one round (its secrets stay in Rust and are zeroized when done).
/// `advertise_message` is its first message (advertise keys); then, for each server message
/// (`bytes`), `handle` returns the answer to send. A server request that contradicts what the
/// client saw (e.g. both kinds of shares of one peer) raises `ProtocolAbort` and the client
/// drops its secrets; malformed, forged, misaddressed or replayed bytes raise `ProtocolError`.
/// Keys come from an OS-seeded CSPRNG (`seed=` only for reproducible experiments: whoever knows
/// it can unmask the input).
///
/// An active round (`config.threat_model == "active"`) needs `device=` (the device's
/// `DeviceKey`, which signs its round keys) and, when the round names a roster, `roster=` with
/// `authority=` (the enrollment authority's 32-byte verifying key): the roster is verified here
/// (signature, not expired by this machine's clock, version at least `min_roster_version`: the
/// highest version this device accepted before, which the caller keeps), and the client refuses
/// a round that names another roster, none while it holds one, or one it is not enrolled on
/// (`ProtocolAbort`). It then answers five stages (`consistency_check`
/// between the masked input and the unmasking).
#[pyclass(module = "privfed.secagg", name = "SecAggClient")]
pub struct SecAggClient {
    inner: Client,
    first: Vec<u8>,
    rng: NoiseRng,
}

impl SecAggClient {
    /// The one constructor behind `new`, `new_sealed` and `open_sealed`: the round's secrets
    /// come from `rng`.
    #[allow(clippy::too_many_arguments)]
    fn build(
        config: &RoundConfig,
        client_id: u32,
        mut rng: NoiseRng,
        device: Option<PyRef<'_, DeviceKey>>,
        roster: Option<PyRef<'_, Roster>>,
        authority: Option<&[u8]>,
        policy: Option<&Bound<'_, PyAny>>,
        min_roster_version: u64,
    ) -> PyResult<Self> {
        let policy = client_policy(policy)?;
        let cfg = config.inner.clone();
        let (inner, msg) = match (device, roster, authority) {
            (None, None, None) => {
                Client::new_with_policy(cfg, client_id, &policy, &mut rng).py()?
            }
            (None, ..) => {
                return Err(invalid(
                    "device",
                    "roster= and authority= come with the device's key (device=)",
                ));
            }
            (Some(_), Some(_), None) => {
                return Err(invalid(
                    "authority",
                    "a roster is trusted only with the enrollment authority's verifying key",
                ));
            }
            (Some(_), None, Some(_)) => {
                return Err(invalid("roster", "authority= without roster="));
            }
            (Some(device), roster, authority) => {
                let roster = match (roster, authority) {
                    (Some(r), Some(a)) => Some(
                        r.inner
                            .clone()
                            .verify(
                                &key32(a, "authority")?,
                                roster_check(None, min_roster_version),
                            )
                            .py()?,
                    ),
                    _ => None,
                };
                let credentials = Credentials {
                    device: device.inner.clone(),
                    roster,
                };
                Client::new_active_with_policy(cfg, client_id, credentials, &policy, &mut rng)
                    .py()?
            }
        };
        Ok(Self {
            inner,
            first: encode(&msg),
            rng,
        })
    }
}
#[pymethods]
impl SecAggClient {
    #[new]
    #[pyo3(signature = (config, client_id, *, seed=None, device=None, roster=None, authority=None, policy=None, min_roster_version=0))]
    #[allow(clippy::too_many_arguments)] // Python's keyword-only constructor, one argument each
    fn new(
        config: PyRef<'_, RoundConfig>,
        client_id: u32,
        seed: Option<&Bound<'_, PyAny>>,
        device: Option<PyRef<'_, DeviceKey>>,
        roster: Option<PyRef<'_, Roster>>,
        authority: Option<&[u8]>,
        policy: Option<&Bound<'_, PyAny>>,
        min_roster_version: u64,
    ) -> PyResult<Self> {
        let rng = rng_from_seed(seed)?;
        Self::build(
            &config,
            client_id,
            rng,
            device,
            roster,
            authority,
            policy,
            min_roster_version,
        )
    }

    /// A client whose round secrets come from a fresh 32-byte master seed drawn from the OS
    /// CSPRNG inside Rust, and that seed **sealed** for the caller to keep between stages:
    /// returns `(client, sealed)`, `sealed = nonce ‖ ChaCha20-Poly1305(key, seed, aad)` (12 +
    /// 32 + 16 bytes, RFC 8439). `key_file`: the node-local 32-byte sealing key (created from
    /// the OS CSPRNG, mode 0600, if missing; refused if group or others can access it), read
    /// here and zeroized after use, like the seed, which never reaches Python. `aad`: what the
    /// seal is bound to (round, node, client, time; `open_sealed` needs the same bytes). The
    /// other arguments are the constructor's.
    #[staticmethod]
    #[pyo3(signature = (config, client_id, *, key_file, aad, device=None, roster=None, authority=None, policy=None, min_roster_version=0))]
    #[allow(clippy::too_many_arguments)]
    fn new_sealed<'py>(
        py: Python<'py>,
        config: PyRef<'_, RoundConfig>,
        client_id: u32,
        key_file: PathBuf,
        aad: &[u8],
        device: Option<PyRef<'_, DeviceKey>>,
        roster: Option<PyRef<'_, Roster>>,
        authority: Option<&[u8]>,
        policy: Option<&Bound<'_, PyAny>>,
        min_roster_version: u64,
    ) -> PyResult<(Self, Bound<'py, PyBytes>)> {
        create_secret(&key_file)?;
        let key = read_secret(&key_file)?;
        let seed = os_key()?;
        let mut nonce_rng = NoiseRng::from_seed(*os_key()?);
        let sealed = privfed_secagg::crypto::seal_seed(&key, aad, &seed, &mut nonce_rng).py()?;
        let client = Self::build(
            &config,
            client_id,
            NoiseRng::from_seed(*seed),
            device,
            roster,
            authority,
            policy,
            min_roster_version,
        )?;
        Ok((client, PyBytes::new(py, &sealed)))
    }

    /// The client of `new_sealed` rebuilt from its `sealed` seed: opened under `key_file` with
    /// the same `aad` (a seed sealed in the same layout by any ChaCha20-Poly1305 implementation
    /// opens too). Raises `ProtocolAbort` when it does not open (no key file, another key,
    /// another binding, altered bytes); the rebuilt client then replays the server messages it had answered.
    #[staticmethod]
    #[pyo3(signature = (config, client_id, sealed, *, key_file, aad, device=None, roster=None, authority=None, policy=None, min_roster_version=0))]
    #[allow(clippy::too_many_arguments)]
    fn open_sealed(
        config: PyRef<'_, RoundConfig>,
        client_id: u32,
        sealed: &[u8],
        key_file: PathBuf,
        aad: &[u8],
        device: Option<PyRef<'_, DeviceKey>>,
        roster: Option<PyRef<'_, Roster>>,
        authority: Option<&[u8]>,
        policy: Option<&Bound<'_, PyAny>>,
        min_roster_version: u64,
    ) -> PyResult<Self> {
        if !key_file.exists() {
            return Err::<Self, _>(privfed_secagg::SecAggError::SealedState(format!(
                "this node has no sealing key ({}): it was sealed elsewhere",
                key_file.display()
            )))
            .py();
        }
        let key = read_secret(&key_file)?;
        let seed = privfed_secagg::crypto::open_seed(&key, aad, sealed).py()?;
        Self::build(
            &config,
            client_id,
            NoiseRng::from_seed(*seed),
            device,
            roster,
            authority,
            policy,
            min_roster_version,
        )
    }

    /// The first message (advertise keys), to send to the server.
    #[getter]
    fn advertise_message<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.first)
    }

    /// Handles the server's message for the next stage and returns the answer (`bytes`).
    /// `input` (integers in `[0, 2^bits)`, length `dim`; e.g. a `SkellamEncoder` encoding) is
    /// needed in the masked-input stage only. The GIL is released while masking.
    #[pyo3(signature = (server_message, input=None))]
    fn handle<'py>(
        &mut self,
        py: Python<'py>,
        server_message: &[u8],
        input: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let input = match input.filter(|i| !i.is_none()) {
            Some(x) => read_u64_vector(x, "input")?,
            None => Vec::new(),
        };
        let Self { inner, rng, .. } = self;
        // Sized against the stage's cap before it is decoded (an oversized message aborts).
        let answer = py
            .detach(|| {
                inner
                    .handle_bytes(server_message, &input, rng)
                    .map(|m| encode(&m))
            })
            .py()?;
        Ok(PyBytes::new(py, &answer))
    }

    /// The stage whose server message the client waits for (`"share_keys"`, `"masked_input"`,
    /// `"consistency_check"` in the active mode, `"unmasking"`), or `None` when it has finished
    /// or aborted.
    #[getter]
    fn next_stage(&self) -> Option<&'static str> {
        stage_name(self.inner.next_stage())
    }
    /// Whether the client aborted the round (and dropped its secrets).
    #[getter]
    fn aborted(&self) -> bool {
        self.inner.is_aborted()
    }
    /// This client's id (`1..=clients`).
    #[getter]
    fn client_id(&self) -> u32 {
        self.inner.id()
    }
    /// The round's configuration.
    #[getter]
    fn config(&self) -> RoundConfig {
        RoundConfig {
            inner: self.inner.config().clone(),
        }
    }
    fn __repr__(&self) -> String {
        format!(
            "<SecAggClient id={} next_stage={:?} aborted={}>",
            self.inner.id(),
            stage_name(self.inner.next_stage()),
            self.inner.is_aborted()
        )
    }
}

fn status_name(s: &RoundStatus) -> &'static str {
    match s {
        RoundStatus::Collecting(_) => "collecting",
        RoundStatus::Finished => "finished",
        RoundStatus::Aborted(_) => "aborted",
    }
}

/// The server's side of one round. It collects each stage's client messages (`receive`),
/// hands each client its next message (`message_for`), and closes the stage when everyone
/// expected answered or its deadline passed (`close_stage`; the server has no clock). Too few
/// survivors abort the round (`status == "aborted"`): nothing about any input is revealed.
/// The whole state round-trips through `to_bytes()` / `SecAggServer.from_bytes()`.
#[pyclass(module = "privfed.secagg", name = "SecAggServer")]
pub struct SecAggServer {
    inner: Server,
}

#[pymethods]
impl SecAggServer {
    #[new]
    fn new(config: PyRef<'_, RoundConfig>) -> PyResult<Self> {
        Ok(Self {
            inner: Server::new(config.inner.clone()).py()?,
        })
    }

    /// Records one client message of the current stage: `"accepted"`, or `"duplicate"` for an
    /// identical retry. A different message for a stage already answered, a message for another
    /// stage (even one recorded before), round or version, or malformed bytes raise
    /// `ProtocolError`.
    fn receive(&mut self, py: Python<'_>, client_message: &[u8]) -> PyResult<&'static str> {
        let m: ClientMessage = decode(client_message).py()?;
        let server = &mut self.inner;
        let r = py.detach(|| server.receive(&m)).py()?;
        Ok(match r {
            Receipt::Accepted => "accepted",
            Receipt::Duplicate => "duplicate",
        })
    }

    /// The message client `client_id` needs for the current stage (`bytes`); a client with no
    /// part in it (dropped, pruned, or the round is over) raises `ProtocolError`.
    fn message_for<'py>(&self, py: Python<'py>, client_id: u32) -> PyResult<Bound<'py, PyBytes>> {
        let m = self.inner.message_for(client_id).py()?;
        Ok(PyBytes::new(py, &encode(&m)))
    }

    /// Closes the current stage and returns the new `status`. Closing the unmasking stage
    /// reconstructs the secrets and removes the masks (GIL released).
    fn close_stage(&mut self, py: Python<'_>) -> PyResult<&'static str> {
        let server = &mut self.inner;
        let s = py.detach(|| server.close_stage().map(status_name)).py()?;
        Ok(s)
    }

    /// `"collecting"`, `"finished"` or `"aborted"`.
    #[getter]
    fn status(&self) -> &'static str {
        status_name(self.inner.status())
    }
    /// The stage being collected (`"advertise_keys"`, `"share_keys"`, `"masked_input"`,
    /// `"unmasking"`), or `None` when the round is over.
    #[getter]
    fn stage(&self) -> Option<&'static str> {
        match self.inner.status() {
            RoundStatus::Collecting(s) => Some(s.name()),
            _ => None,
        }
    }
    /// Why the round aborted, or `None`.
    #[getter]
    fn abort_reason(&self) -> Option<String> {
        match self.inner.status() {
            RoundStatus::Aborted(r) => Some(r.clone()),
            _ => None,
        }
    }
    /// The clients expected in the current stage that have not sent yet (sorted ids).
    #[getter]
    fn pending(&self) -> Vec<u32> {
        self.inner.pending().into_iter().collect()
    }
    /// The finished round's result: a dict with `sum` (numpy `uint64`, the survivors' inputs
    /// summed mod `2^bits`), `survivors` (ids whose inputs are in it) and `dropped` (ids that
    /// shared keys but sent no masked input; their masks were removed) and `rejected_shares` (ids
    /// that sent a wrong Shamir share, traced and excluded). `None` while collecting;
    /// raises `ProtocolAbort` with the reason if the round aborted.
    #[getter]
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        match self.inner.status() {
            RoundStatus::Aborted(r) => Err(error(
                Kind::ProtocolAbort,
                format!("the round aborted: {r}"),
            )),
            _ => match self.inner.output() {
                None => Ok(None),
                Some(a) => {
                    let d = PyDict::new(py);
                    d.set_item("sum", write_u64(py, a.sum.clone(), &[a.sum.len()])?)?;
                    d.set_item("survivors", a.survivors.clone())?;
                    d.set_item("dropped", a.dropped.clone())?;
                    d.set_item("rejected_shares", a.rejected_shares.clone())?;
                    Ok(Some(d))
                }
            },
        }
    }
    /// The round's configuration.
    #[getter]
    fn config(&self) -> RoundConfig {
        RoundConfig {
            inner: self.inner.config().clone(),
        }
    }
    /// The serialized state, to persist between messages or across a restart. It holds what the
    /// clients sent (ciphertexts, masked sums, unmasking shares): store it as the server's
    /// confidential state.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }
    /// Restores a state written by `to_bytes()` (malformed bytes raise `ProtocolError`).
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: Server::from_bytes(data).py()?,
        })
    }
    fn __repr__(&self) -> String {
        format!("<SecAggServer status={:?}>", self.inner.status())
    }
}

/// A wire message (`bytes`) as a dict (its serde form), for inspection and for tests that play
/// a misbehaving party. `sender` is `"server"` (a message to a client) or `"client"`.
#[pyfunction]
#[pyo3(name = "decode_message", signature = (data, *, sender))]
fn secagg_decode_message<'py>(
    py: Python<'py>,
    data: &[u8],
    sender: &str,
) -> PyResult<Bound<'py, PyAny>> {
    match sender {
        "server" => to_python(py, &decode::<ServerMessage>(data).py()?),
        "client" => to_python(py, &decode::<ClientMessage>(data).py()?),
        other => Err(invalid(
            "sender",
            format!("expected \"server\" or \"client\", got {other:?}"),
        )),
    }
}

/// The wire bytes of a message dict (the form `decode_message` returns). Nothing is checked but
/// the form: the receiving party validates everything, as it must for any bytes.
#[pyfunction]
#[pyo3(name = "encode_message", signature = (message, *, sender))]
fn secagg_encode_message<'py>(
    py: Python<'py>,
    message: &Bound<'py, PyAny>,
    sender: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = match sender {
        "server" => encode(&from_python::<ServerMessage>(
            message,
            "server message",
            Kind::ProtocolError,
        )?),
        "client" => encode(&from_python::<ClientMessage>(
            message,
            "client message",
            Kind::ProtocolError,
        )?),
        other => {
            return Err(invalid(
                "sender",
                format!("expected \"server\" or \"client\", got {other:?}"),
            ));
        }
    };
    Ok(PyBytes::new(py, &bytes))
}

/// One round in this process with `clients` real clients and a real server exchanging encoded
/// messages (`privfed_sim::secagg::simulate_in_process`): uniform inputs in `Z_{2^bits}^dim`
/// and exactly `round(dropout·clients)` dropouts before `dropout_stage`, both from `seed` (the
/// OS when omitted); the protocol's keys always come from the OS. Returns the report of
/// `privfed secagg simulate --json` (`exact`, `survivors`, `threshold`, `seconds`,
/// `bytes_per_client`, …). An aborted round raises `ProtocolAbort`. Every client joins under
/// `policy` (as `SecAggClient`'s: `None` for the defaults, which refuse e.g. fewer than 3
/// clients; `"permissive"` for experiments).
#[pyfunction]
#[pyo3(name = "simulate", signature = (clients, dim, bits=32, dropout=0.0, *, dropout_stage="masked_input", graph="auto", degree=None, threshold=None, seed=None, threat_model="active", policy=None))]
#[allow(clippy::too_many_arguments)]
fn secagg_simulate<'py>(
    py: Python<'py>,
    clients: u32,
    dim: usize,
    bits: u32,
    dropout: f64,
    dropout_stage: &str,
    graph: &str,
    degree: Option<u32>,
    threshold: Option<u32>,
    seed: Option<u64>,
    threat_model: &str,
    policy: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let policy = client_policy(policy)?;
    if dim == 0 {
        return Err(invalid("dim", "must be at least 1"));
    }
    let threat = match threat_model {
        "active" => SecAggThreat::Active,
        "honest-but-curious" => SecAggThreat::HonestButCurious,
        other => {
            return Err(invalid(
                "threat_model",
                format!("`{other}`: active or honest-but-curious"),
            ));
        }
    };
    let cfg = SecAggSimConfig {
        clients,
        dim,
        bits,
        dropout,
        dropout_stage: stage_from_str(dropout_stage)?,
        graph: graph_choice(graph, degree, threshold)?,
        seed,
        threat,
        policy,
    };
    let report = py.detach(|| simulate_in_process(&cfg, &|_| {})).py()?;
    to_python(py, &report)
}

/// A `ClientPolicy` from Python: `None` (the defaults), `"default"`, `"permissive"` (every rule
/// off; tests and experiments only) or a dict (or JSON string) of its fields (`min_clients`,
/// `min_threshold`, `min_threshold_fraction`, `min_degree`, `accept_honest_but_curious`,
/// `accept_active_without_roster`); missing fields keep their defaults, unknown ones are refused.
pub(crate) fn client_policy(obj: Option<&Bound<'_, PyAny>>) -> PyResult<ClientPolicy> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(ClientPolicy::default());
    };
    if let Ok(s) = obj.extract::<String>() {
        match s.as_str() {
            "default" => return Ok(ClientPolicy::default()),
            "permissive" => return Ok(ClientPolicy::permissive()),
            _ if s.trim_start().starts_with('{') => {}
            _ => {
                return Err(invalid(
                    "policy",
                    format!("`{s}`: expected \"default\", \"permissive\" or a dict of rules"),
                ));
            }
        }
    }
    let p: ClientPolicy = from_python(obj, "policy", Kind::InvalidParameter)?;
    p.validate().py()?;
    Ok(p)
}

/// Checks `config` against the client policy `policy` (see `SecAggClient`): raises
/// `ProtocolAbort` naming the rule, the round's value and the limit when the policy refuses the
/// round; `InvalidParameter` for a malformed configuration or policy.
#[pyfunction]
#[pyo3(name = "check_policy", signature = (config, policy=None))]
fn secagg_check_policy(
    config: PyRef<'_, RoundConfig>,
    policy: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let policy = client_policy(policy)?;
    config.inner.validate().py()?;
    policy.check(&config.inner).py()
}

/// Registers the classes and functions (re-exported by `privfed.secagg`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RoundConfig>()?;
    m.add_class::<SecAggClient>()?;
    m.add_class::<SecAggServer>()?;
    m.add_class::<DeviceKey>()?;
    m.add_class::<Roster>()?;
    m.add_function(wrap_pyfunction!(secagg_round_config, m)?)?;
    m.add_function(wrap_pyfunction!(plan_secagg_plus, m)?)?;
    m.add_function(wrap_pyfunction!(secagg_decode_message, m)?)?;
    m.add_function(wrap_pyfunction!(secagg_encode_message, m)?)?;
    m.add_function(wrap_pyfunction!(secagg_simulate, m)?)?;
    m.add_function(wrap_pyfunction!(secagg_check_policy, m)?)?;
    Ok(())
}
