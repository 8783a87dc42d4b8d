//! Per-client rate limits on draws and updates: a token bucket per client IP address.
//!
//! The guard bounds what one update can do; how many updates (and draws) one client may make is
//! what bounds a sustained poisoning campaign (`docs/SERVER_THREAT_MODEL.md`): an attacker who
//! draws many tickets picks the most favourable instance to post from. Each draw and each update
//! takes one token from the bucket of the connection's peer address; a bucket holds at most
//! `burst` tokens and refills at `per_second`. An empty bucket answers 429 with `Retry-After`.
//!
//! Memory is bounded: at most [`MAX_CLIENTS`] buckets are kept; when full, buckets that have
//! refilled completely (idle clients, indistinguishable from new ones) are dropped first, and if
//! none has, the oldest half is forgotten (those clients start again with a full bucket: the
//! limit fails open rather than refusing everyone). Behind a reverse proxy every client has the
//! proxy's address: limit at the proxy instead.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most clients tracked at once.
pub const MAX_CLIENTS: usize = 1 << 16;

/// A rate: `per_second` sustained, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Tokens added per second.
    pub per_second: f64,
    /// Bucket size (at least 1).
    pub burst: f64,
}

impl RateLimit {
    /// A validated rate; `None` unless both are finite, `per_second > 0` and `burst ≥ 1`.
    pub fn new(per_second: f64, burst: f64) -> Option<Self> {
        (per_second.is_finite() && per_second > 0.0 && burst.is_finite() && burst >= 1.0)
            .then_some(Self { per_second, burst })
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets per client address (see the [module documentation](self)).
#[derive(Debug)]
pub struct RateLimiter {
    limit: RateLimit,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl RateLimiter {
    /// A limiter with every bucket initially full.
    pub fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// The limit.
    pub fn limit(&self) -> RateLimit {
        self.limit
    }

    /// Takes one token for `client` at time `now`: `Ok` or `Err(wait)` until one is available.
    pub fn take_at(&self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        let l = self.limit;
        let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if b.len() >= MAX_CLIENTS && !b.contains_key(&client) {
            b.retain(|_, k| refilled(k, now, l) < l.burst);
            if b.len() >= MAX_CLIENTS {
                let mut ages: Vec<Instant> = b.values().map(|k| k.at).collect();
                ages.sort_unstable();
                let cut = ages[ages.len() / 2];
                b.retain(|_, k| k.at > cut);
            }
        }
        let k = b.entry(client).or_insert(Bucket {
            tokens: l.burst,
            at: now,
        });
        k.tokens = refilled(k, now, l);
        k.at = now;
        if k.tokens >= 1.0 {
            k.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - k.tokens) / l.per_second))
        }
    }

    /// [`RateLimiter::take_at`] now.
    pub fn take(&self, client: IpAddr) -> Result<(), Duration> {
        self.take_at(client, Instant::now())
    }

    /// Number of clients tracked.
    pub fn clients(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

fn refilled(k: &Bucket, now: Instant, l: RateLimit) -> f64 {
    let dt = now.saturating_duration_since(k.at).as_secs_f64();
    (k.tokens + dt * l.per_second).min(l.burst)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u32) -> IpAddr {
        IpAddr::from(n.to_be_bytes())
    }

    #[test]
    fn burst_then_sustained_rate() {
        let r = RateLimiter::new(RateLimit::new(10.0, 3.0).unwrap());
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(r.take_at(ip(1), t0).is_ok());
        }
        let wait = r.take_at(ip(1), t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        // Another client is not affected.
        assert!(r.take_at(ip(2), t0).is_ok());
        // 0.1 s later one token is back, not two.
        let t1 = t0 + Duration::from_millis(100);
        assert!(r.take_at(ip(1), t1).is_ok());
        assert!(r.take_at(ip(1), t1).is_err());
        // Over 10 s at most burst + 10·10 tokens are granted.
        let mut granted = 0;
        for ms in 0..10_000u64 {
            if r.take_at(ip(3), t0 + Duration::from_millis(ms)).is_ok() {
                granted += 1;
            }
        }
        assert!((100..=103).contains(&granted), "{granted}");
    }

    #[test]
    fn invalid_rates_are_refused() {
        for (p, b) in [
            (0.0, 1.0),
            (-1.0, 1.0),
            (1.0, 0.5),
            (f64::NAN, 1.0),
            (1.0, f64::INFINITY),
        ] {
            assert!(RateLimit::new(p, b).is_none(), "{p} {b}");
        }
    }

    #[test]
    fn memory_is_bounded() {
        let r = RateLimiter::new(RateLimit::new(1.0, 2.0).unwrap());
        let t0 = Instant::now();
        for n in 0..(MAX_CLIENTS as u32 + 1000) {
            let _ = r.take_at(ip(n), t0 + Duration::from_micros(u64::from(n)));
        }
        assert!(r.clients() <= MAX_CLIENTS, "{}", r.clients());
    }
}
