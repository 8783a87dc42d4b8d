//! Prometheus metrics, kept in atomics (no lock on the request path) and rendered as the text
//! exposition format by `GET /metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// The routes that are counted separately (anything else is `other`).
pub const ROUTES: [&str; 9] = [
    "/v1/models",
    "/v1/models/{name}",
    "/v1/models/{name}/draw",
    "/v1/models/{name}/updates",
    "/healthz",
    "/metrics",
    "/openapi.json",
    "/bench/{dim}",
    "other",
];

/// Status codes counted separately (anything else is counted under its class, e.g. `5xx`).
const CODES: [u16; 19] = [
    200, 201, 202, 204, 400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 428, 429, 500, 503, 507,
];

/// Upper bounds of the latency histogram, seconds.
pub const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

const SLOTS: usize = CODES.len() + 1;

/// All counters of one server process.
pub struct Metrics {
    requests: Vec<AtomicU64>,
    latency: Vec<AtomicU64>,
    latency_sum_ns: Vec<AtomicU64>,
    latency_count: Vec<AtomicU64>,
    accepted: AtomicU64,
    rejected: AtomicU64,
    connections_opened: AtomicU64,
    connections_closed: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        let n = |m: usize| (0..m).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Self {
            requests: n(ROUTES.len() * SLOTS),
            latency: n(ROUTES.len() * (BUCKETS.len() + 1)),
            latency_sum_ns: n(ROUTES.len()),
            latency_count: n(ROUTES.len()),
            accepted: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            connections_opened: AtomicU64::new(0),
            connections_closed: AtomicU64::new(0),
        }
    }
}

/// Index of `route` in [`ROUTES`] (`other` if absent).
pub fn route_index(route: &str) -> usize {
    ROUTES
        .iter()
        .position(|r| *r == route)
        .unwrap_or(ROUTES.len() - 1)
}

impl Metrics {
    /// Records one request on `route` (a matched path pattern) with `status` and latency.
    pub fn record(&self, route: &str, status: u16, seconds: f64) {
        self.record_index(route_index(route), status, seconds);
    }

    /// [`Metrics::record`] with the route given by its [`route_index`].
    pub fn record_index(&self, r: usize, status: u16, seconds: f64) {
        let r = r.min(ROUTES.len() - 1);
        let s = CODES
            .iter()
            .position(|c| *c == status)
            .unwrap_or(CODES.len());
        self.requests[r * SLOTS + s].fetch_add(1, Ordering::Relaxed);
        let b = BUCKETS
            .iter()
            .position(|&ub| seconds <= ub)
            .unwrap_or(BUCKETS.len());
        self.latency[r * (BUCKETS.len() + 1) + b].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_ns[r].fetch_add((seconds * 1e9) as u64, Ordering::Relaxed);
        self.latency_count[r].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an accepted update.
    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an update rejected by the spam filter.
    pub fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an accepted connection.
    pub fn connection_opened(&self) {
        self.connections_opened.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a closed connection.
    pub fn connection_closed(&self) {
        self.connections_closed.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections open now (accepted and not yet closed).
    pub fn connections_open(&self) -> u64 {
        let closed = self.connections_closed.load(Ordering::Relaxed);
        self.connections_opened
            .load(Ordering::Relaxed)
            .saturating_sub(closed)
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# HELP privfed_http_requests_total HTTP requests by route and status.\n# TYPE privfed_http_requests_total counter"
        );
        for (r, route) in ROUTES.iter().enumerate() {
            for s in 0..SLOTS {
                let v = self.requests[r * SLOTS + s].load(Ordering::Relaxed);
                if v == 0 {
                    continue;
                }
                let code = CODES
                    .get(s)
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "other".into());
                let _ = writeln!(
                    o,
                    "privfed_http_requests_total{{route=\"{route}\",code=\"{code}\"}} {v}"
                );
            }
        }
        let _ = writeln!(
            o,
            "# HELP privfed_updates_accepted_total Updates accepted by this process.\n# TYPE privfed_updates_accepted_total counter\nprivfed_updates_accepted_total {}",
            self.accepted.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            o,
            "# HELP privfed_updates_rejected_total Updates rejected by the spam filter in this process.\n# TYPE privfed_updates_rejected_total counter\nprivfed_updates_rejected_total {}",
            self.rejected.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            o,
            "# HELP privfed_http_connections_open Connections open now.\n# TYPE privfed_http_connections_open gauge\nprivfed_http_connections_open {}",
            self.connections_open()
        );
        let _ = writeln!(
            o,
            "# HELP privfed_http_connections_total Connections accepted by this process.\n# TYPE privfed_http_connections_total counter\nprivfed_http_connections_total {}",
            self.connections_opened.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            o,
            "# HELP privfed_http_request_duration_seconds Request latency by route.\n# TYPE privfed_http_request_duration_seconds histogram"
        );
        for (r, route) in ROUTES.iter().enumerate() {
            let count = self.latency_count[r].load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            let mut cum = 0u64;
            for (b, ub) in BUCKETS.iter().enumerate() {
                cum += self.latency[r * (BUCKETS.len() + 1) + b].load(Ordering::Relaxed);
                let _ = writeln!(
                    o,
                    "privfed_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{ub}\"}} {cum}"
                );
            }
            let _ = writeln!(
                o,
                "privfed_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {count}"
            );
            let _ = writeln!(
                o,
                "privfed_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                self.latency_sum_ns[r].load(Ordering::Relaxed) as f64 * 1e-9
            );
            let _ = writeln!(
                o,
                "privfed_http_request_duration_seconds_count{{route=\"{route}\"}} {count}"
            );
        }
        o
    }
}

/// Appends a store's group-commit counters: durable commits that carried updates, the updates
/// they carried, and checkpoints of its journal.
pub fn render_commits(o: &mut String, c: CommitCounters) {
    let _ = writeln!(
        o,
        "# HELP privfed_store_commits_total Durable group commits that carried updates.\n# TYPE privfed_store_commits_total counter\nprivfed_store_commits_total {}",
        c.commits
    );
    let _ = writeln!(
        o,
        "# HELP privfed_store_committed_updates_total Updates (accepted or rejected) carried by those commits.\n# TYPE privfed_store_committed_updates_total counter\nprivfed_store_committed_updates_total {}",
        c.operations
    );
    let _ = writeln!(
        o,
        "# HELP privfed_store_checkpoints_total Checkpoints of the update journal into the database.\n# TYPE privfed_store_checkpoints_total counter\nprivfed_store_checkpoints_total {}",
        c.checkpoints
    );
}

/// A store's group-commit counters, as [`render_commits`] publishes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitCounters {
    /// Durable transactions that carried updates.
    pub commits: u64,
    /// Updates (accepted or rejected) those transactions carried.
    pub operations: u64,
    /// Checkpoints of the update journal into the tables.
    pub checkpoints: u64,
}
