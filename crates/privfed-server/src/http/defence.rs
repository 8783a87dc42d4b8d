//! The server's defences against hostile clients, counted in `/metrics` and logged at WARN at
//! most once per [`LOG_EVERY`] per defence (with how many times it fired meanwhile), so that an
//! attack leaves a trace without a flood of log lines.

use std::fmt::Write;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Shortest interval between two log lines of the same defence.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// A defence that refused something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defence {
    /// An update was refused before its body was read: no ticket, or an unknown, used or busy
    /// one.
    UnreadRefused,
    /// A client address bucket holds its cap of outstanding tickets
    /// ([`crate::ddml::ticket::DrawQuota`]).
    DrawQuota,
    /// A model's ticket book is full of tickets younger than the step time
    /// ([`crate::ddml::ticket::TicketBook`]).
    TicketsFull,
    /// A connection was closed at accept: its address holds its cap of open connections.
    ConnectionsPerAddress,
    /// The per-client rate limit ([`crate::http::ratelimit`]).
    RateLimit,
    /// An update body found no room in the budget of bodies being read at once.
    BodyBudget,
}

impl Defence {
    /// Every defence (the order of their counters).
    pub const ALL: [Defence; 6] = [
        Defence::UnreadRefused,
        Defence::DrawQuota,
        Defence::TicketsFull,
        Defence::ConnectionsPerAddress,
        Defence::RateLimit,
        Defence::BodyBudget,
    ];

    /// The label in `/metrics` and in the log line.
    pub fn name(self) -> &'static str {
        match self {
            Defence::UnreadRefused => "unread_refused",
            Defence::DrawQuota => "draw_quota",
            Defence::TicketsFull => "tickets_full",
            Defence::ConnectionsPerAddress => "connections_per_address",
            Defence::RateLimit => "rate_limit",
            Defence::BodyBudget => "body_budget",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Defence::UnreadRefused => "updates refused before their body was read (ticket)",
            Defence::DrawQuota => "draws refused: the client holds its cap of tickets",
            Defence::TicketsFull => "draws refused: every ticket is younger than the step time",
            Defence::ConnectionsPerAddress => {
                "connections closed at accept: the address holds its cap of connections"
            }
            Defence::RateLimit => "requests refused by the per-client rate limit",
            Defence::BodyBudget => "updates refused: the budget of bodies in flight is spent",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Counters and rate-limited log lines of the [`Defence`]s of one server.
#[derive(Debug)]
pub struct Defences {
    fired: [AtomicU64; Defence::ALL.len()],
    /// When each defence last logged, and its count then.
    logged: Mutex<[(Option<Instant>, u64); Defence::ALL.len()]>,
}

impl Default for Defences {
    fn default() -> Self {
        Self {
            fired: std::array::from_fn(|_| AtomicU64::new(0)),
            logged: Mutex::new([(None, 0); Defence::ALL.len()]),
        }
    }
}

impl Defences {
    /// Counts `d` firing against `peer`, and logs it unless it logged within [`LOG_EVERY`].
    pub fn fired(&self, d: Defence, peer: Option<IpAddr>) {
        let n = self.fired[d.index()].fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let since = {
            let mut l = self.logged.lock().unwrap_or_else(|e| e.into_inner());
            let (at, count) = &mut l[d.index()];
            if at.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
                return;
            }
            *at = Some(now);
            std::mem::replace(count, n)
        };
        tracing::warn!(
            defence = d.name(),
            peer = %peer.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            times_since_last_line = n - since,
            total = n,
            "{}",
            d.what()
        );
    }

    /// How often `d` fired.
    pub fn count(&self, d: Defence) -> u64 {
        self.fired[d.index()].load(Ordering::Relaxed)
    }

    /// Appends the counters in the Prometheus text format.
    pub fn render(&self, o: &mut String) {
        let _ = writeln!(
            o,
            "# HELP privfed_defence_fired_total Requests or connections refused by a defence against hostile clients.\n# TYPE privfed_defence_fired_total counter"
        );
        for d in Defence::ALL {
            let _ = writeln!(
                o,
                "privfed_defence_fired_total{{defence=\"{}\"}} {}",
                d.name(),
                self.count(d)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_defence_is_counted_and_rendered() {
        let d = Defences::default();
        for (i, x) in Defence::ALL.iter().enumerate() {
            assert_eq!(x.index(), i);
            for _ in 0..=i {
                d.fired(*x, None);
            }
        }
        let mut o = String::new();
        d.render(&mut o);
        for (i, x) in Defence::ALL.iter().enumerate() {
            assert_eq!(d.count(*x), i as u64 + 1);
            assert!(o.contains(&format!(
                "privfed_defence_fired_total{{defence=\"{}\"}} {}",
                x.name(),
                i + 1
            )));
        }
    }
}
