//! The connection to Redis that both Redis stores share (the Draw-and-Discard
//! [`RedisStore`](crate::ddml::store::redis::RedisStore) and the secure-aggregation
//! [`RedisRoundStore`](crate::secagg::RedisRoundStore)): its durability policy, the check of the
//! server's persistence at start-up, the confirmation of each write, and the classification of
//! errors into outages and failures (see the Redis store's
//! [module documentation](crate::ddml::store::redis) for the policy's reasons).

use crate::http::error::StoreError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::collections::HashMap;
use std::time::Duration;

fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}
/// What an acknowledged write (202) of a [`RedisStore`](crate::ddml::store::redis::RedisStore) promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Survives a crash of `redis-server`: start-up requires `appendonly yes` and
    /// `appendfsync always`, and each write is confirmed persistent before it is acknowledged
    /// (`WAITAOF` on Redis ≥ 7.2, a configuration re-check before). The default.
    #[default]
    Strict,
    /// As durable as the Redis deployment happens to make it (the stock configuration loses the
    /// writes since the last RDB snapshot); 202 answers `{"status":"accepted","durable":false}`.
    BestEffort,
}

/// Connection options of [`RedisStore::connect_with`](crate::ddml::store::redis::RedisStore::connect_with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedisOptions {
    /// What a 202 promises.
    pub durability: Durability,
    /// Limit of one attempt to (re)connect to Redis (default 1 s).
    pub connection_timeout: Duration,
    /// Limit of one command's reply (default 1 s; keep it above [`WAITAOF_TIMEOUT`]).
    pub response_timeout: Duration,
    /// Attempts to reconnect after the first failed one, with a backoff of 100–500 ms
    /// (default 1), before a request fails with 503. Each later request tries again.
    pub reconnect_retries: usize,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Strict,
            connection_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            reconnect_retries: 1,
        }
    }
}

impl RedisOptions {
    fn manager_config(&self) -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connection_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_number_of_retries(self.reconnect_retries)
            .set_min_delay(Duration::from_millis(100))
            .set_max_delay(Duration::from_millis(500))
    }
}

/// How long `WAITAOF` (Redis ≥ 7.2, [`Durability::Strict`]) waits for a write to reach the AOF
/// on disk before the write is answered 503 instead of 202.
pub const WAITAOF_TIMEOUT: Duration = Duration::from_millis(500);

/// How a strict store confirms each write before acknowledging it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Confirm {
    /// Best-effort: nothing.
    Nothing,
    /// `WAITAOF 1 0 ms` (Redis ≥ 7.2).
    WaitAof,
    /// `CONFIG GET appendonly` / `appendfsync` still `yes` / `always` (Redis < 7.2, where
    /// `appendfsync always` fsyncs before the reply).
    Config,
}

/// A Redis server's persistence, as read at start-up and by health checks.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Persistence {
    /// `redis_version` of `INFO server`, `(0, 0, 0)` when unknown.
    version: (u32, u32, u32),
    /// `appendonly` (`CONFIG GET`), or `aof_enabled` of `INFO persistence`.
    appendonly: bool,
    /// `appendfsync`, `None` when `CONFIG GET` is unavailable.
    appendfsync: Option<String>,
    /// Why `CONFIG GET` could not be used (renamed, disabled, denied by an ACL).
    config_error: Option<String>,
}

impl Persistence {
    /// How each write is confirmed in strict mode, or why strict mode is impossible (naming the
    /// setting to change).
    fn strict_confirm(&self) -> Result<Confirm, String> {
        let has_waitaof = self.version >= (7, 2, 0);
        if !self.appendonly {
            let source = match &self.config_error {
                None => "appendonly is `no`".to_string(),
                Some(e) => format!(
                    "INFO persistence reports aof_enabled:0 (CONFIG GET is unavailable: {e})"
                ),
            };
            return Err(format!(
                "{source}; set `appendonly yes` and `appendfsync always` (in redis.conf, or \
                 CONFIG SET appendonly yes, CONFIG SET appendfsync always, CONFIG REWRITE)"
            ));
        }
        match (self.appendfsync.as_deref(), &self.config_error) {
            (Some("always"), _) if has_waitaof => Ok(Confirm::WaitAof),
            (Some("always"), _) => Ok(Confirm::Config),
            (Some(other), _) => Err(format!(
                "appendfsync is `{other}`, so the writes of up to the last second or more are lost \
                 in a crash; set `appendfsync always` (in redis.conf, or CONFIG SET appendfsync \
                 always, CONFIG REWRITE)"
            )),
            // WAITAOF confirms each write whatever the fsync policy.
            (None, _) if has_waitaof => Ok(Confirm::WaitAof),
            (None, e) => Err(format!(
                "appendfsync cannot be read (CONFIG GET is unavailable: {}; INFO persistence does \
                 not report it) and Redis {}.{}.{} has no WAITAOF (7.2) to confirm each write; \
                 allow CONFIG GET for this connection and set `appendfsync always`, or use \
                 Redis ≥ 7.2 with `appendonly yes`",
                e.as_deref().unwrap_or("unknown"),
                self.version.0,
                self.version.1,
                self.version.2
            )),
        }
    }
}

/// Whether a Redis error means "not now" (outage, timeout, Redis loading or refusing writes):
/// such errors answer 503 with `Retry-After`, all others 500.
fn is_outage(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
            )
        )
        || matches!(
            e.code(),
            Some("MISCONF" | "BUSY" | "OOM" | "NOREPLICAS" | "LOADING" | "MASTERDOWN")
        )
}

/// A Redis error as a store error: [`StoreError::Unavailable`] for an outage ([`is_outage`]),
/// [`StoreError::Backend`] otherwise.
pub(crate) fn redis_err(e: redis::RedisError) -> StoreError {
    if is_outage(&e) {
        StoreError::Unavailable(format!("redis: {e}"))
    } else {
        StoreError::Backend(format!("redis: {e}"))
    }
}

/// The value of `field` in the text of `INFO` (`field:value` lines).
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// `"7.0.15"` as `(7, 0, 15)`; missing or unparsable parts count as 0.
fn parse_version(v: &str) -> (u32, u32, u32) {
    let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// `(appendonly, appendfsync)` from `CONFIG GET`; the inner `Err` says why `CONFIG` cannot be
/// used (a server error such as an unknown or denied command), the outer one is an outage.
async fn read_config(
    con: &mut ConnectionManager,
) -> Result<Result<(bool, String), String>, StoreError> {
    // One parameter per CONFIG GET (several need Redis 7), pipelined in one round trip.
    let r: redis::RedisResult<(HashMap<String, String>, HashMap<String, String>)> = redis::pipe()
        .cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query_async(con)
        .await;
    match r {
        Ok((a, f)) => match (a.get("appendonly"), f.get("appendfsync")) {
            (Some(a), Some(f)) => Ok(Ok((a.eq_ignore_ascii_case("yes"), f.to_ascii_lowercase()))),
            _ => Ok(Err(
                "CONFIG GET did not return appendonly/appendfsync".into()
            )),
        },
        Err(e) if is_outage(&e) => Err(redis_err(e)),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// The server's version and persistence configuration (`INFO persistence` when `CONFIG` is
/// unavailable).
async fn read_persistence(con: &mut ConnectionManager) -> Result<Persistence, StoreError> {
    let server: redis::RedisResult<String> =
        redis::cmd("INFO").arg("server").query_async(con).await;
    let version = match server {
        Ok(info) => info_field(&info, "redis_version").map_or((0, 0, 0), parse_version),
        Err(e) if is_outage(&e) => return Err(redis_err(e)),
        Err(_) => (0, 0, 0),
    };
    match read_config(con).await? {
        Ok((appendonly, fsync)) => Ok(Persistence {
            version,
            appendonly,
            appendfsync: Some(fsync),
            config_error: None,
        }),
        Err(why) => {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query_async(con)
                .await
                .map_err(redis_err)?;
            Ok(Persistence {
                version,
                appendonly: info_field(&info, "aof_enabled") == Some("1"),
                appendfsync: None,
                config_error: Some(why),
            })
        }
    }
}

/// A connection to Redis with its durability policy: the one place where the Redis stores (the
/// Draw-and-Discard [`RedisStore`](crate::ddml::store::redis::RedisStore) and the secure-aggregation
/// [`RedisRoundStore`](crate::secagg::RedisRoundStore)) connect, check the server's
/// persistence at start-up, confirm each write before acknowledging it and classify errors
/// (see the [module documentation](self)). Clones share one multiplexed connection, so a
/// `WAITAOF` sent through any clone covers the writes sent before it through the others.
#[derive(Clone)]
pub struct RedisConnection {
    con: ConnectionManager,
    durability: Durability,
    confirm: Confirm,
}

impl std::fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConnection")
            .field("durability", &self.durability)
            .field("confirm", &self.confirm)
            .finish_non_exhaustive()
    }
}

impl RedisConnection {
    /// Connects to `url` (`redis://HOST:PORT[/DB]`) with `options`: applies the timeouts, reads
    /// the server's version and persistence configuration and, in [`Durability::Strict`] mode,
    /// refuses (with [`StoreError::Unavailable`] naming the setting to change) a Redis that
    /// would lose acknowledged writes in a crash.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(backend)?;
        let mut con = ConnectionManager::new_with_config(client, options.manager_config())
            .await
            .map_err(redis_err)?;
        let _: String = redis::cmd("PING")
            .query_async(&mut con)
            .await
            .map_err(redis_err)?;
        let confirm = match options.durability {
            Durability::BestEffort => {
                tracing::warn!(
                    "Redis durability is best-effort: an acknowledged update may be lost if \
                     redis-server crashes (202 answers \"durable\": false)"
                );
                Confirm::Nothing
            }
            Durability::Strict => {
                let p = read_persistence(&mut con).await?;
                p.strict_confirm().map_err(|why| {
                    StoreError::Unavailable(format!(
                        "this Redis would lose acknowledged updates in a crash: {why}; or \
                         accept that risk with best-effort durability \
                         (--redis-durability best-effort), whose 202 answers \"durable\": false"
                    ))
                })?
            }
        };
        Ok(Self {
            con,
            durability: options.durability,
            confirm,
        })
    }

    /// A handle on the multiplexed connection (cheap to clone).
    pub fn manager(&self) -> ConnectionManager {
        self.con.clone()
    }

    /// What an acknowledged write promises.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Whether Redis answers and, in [`Durability::Strict`] mode, still persists every write as
    /// promised at start-up (what `/healthz` reports).
    pub async fn healthy(&self) -> bool {
        let mut con = self.con.clone();
        match self.durability {
            Durability::BestEffort => redis::cmd("PING")
                .query_async::<String>(&mut con)
                .await
                .is_ok(),
            Durability::Strict => match read_persistence(&mut con).await {
                Ok(p) => p.strict_confirm().is_ok(),
                Err(_) => false,
            },
        }
    }

    /// After a write, before it is acknowledged: confirms that it is as durable as promised
    /// (see [`Durability::Strict`]), or answers [`StoreError::Unavailable`].
    pub async fn confirm_durable(&self) -> Result<(), StoreError> {
        let mut con = self.con.clone();
        match self.confirm {
            Confirm::Nothing => Ok(()),
            Confirm::WaitAof => {
                let r: redis::RedisResult<(u64, u64)> = redis::cmd("WAITAOF")
                    .arg(1)
                    .arg(0)
                    .arg(WAITAOF_TIMEOUT.as_millis() as u64)
                    .query_async(&mut con)
                    .await;
                match r {
                    Ok((local, _)) if local >= 1 => Ok(()),
                    Ok(_) => Err(StoreError::Unavailable(format!(
                        "redis: the write did not reach the AOF on disk within {} ms (WAITAOF)",
                        WAITAOF_TIMEOUT.as_millis()
                    ))),
                    Err(e) if is_outage(&e) => Err(redis_err(e)),
                    // E.g. "WAITAOF cannot be used when numlocal is set but appendonly is
                    // disabled": persistence was turned off at run time.
                    Err(e) => Err(StoreError::Unavailable(format!(
                        "redis: cannot confirm persistence: {e}"
                    ))),
                }
            }
            Confirm::Config => match read_config(&mut con).await? {
                Ok((true, fsync)) if fsync == "always" => Ok(()),
                Ok((appendonly, fsync)) => Err(StoreError::Unavailable(format!(
                    "redis: persistence changed at run time (appendonly {}, appendfsync {fsync}): \
                     writes are no longer durable",
                    if appendonly { "yes" } else { "no" }
                ))),
                Err(why) => Err(StoreError::Unavailable(format!(
                    "redis: cannot confirm persistence: {why}"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(version: (u32, u32, u32), appendonly: bool, fsync: Option<&str>) -> Persistence {
        Persistence {
            version,
            appendonly,
            appendfsync: fsync.map(String::from),
            config_error: fsync
                .is_none()
                .then(|| "ERR unknown command 'CONFIG'".into()),
        }
    }

    #[test]
    fn strict_requires_aof_with_fsync_always() {
        let e = p((7, 0, 15), false, Some("everysec"))
            .strict_confirm()
            .unwrap_err();
        assert!(
            e.contains("appendonly is `no`") && e.contains("appendonly yes"),
            "{e}"
        );
        let e = p((7, 0, 15), true, Some("everysec"))
            .strict_confirm()
            .unwrap_err();
        assert!(e.contains("appendfsync is `everysec`") && e.contains("appendfsync always"));
        assert_eq!(
            p((7, 0, 15), true, Some("always")).strict_confirm(),
            Ok(Confirm::Config)
        );
        assert_eq!(
            p((7, 2, 0), true, Some("always")).strict_confirm(),
            Ok(Confirm::WaitAof)
        );
        // Even 7.2's WAITAOF is not accepted in place of `always` when the policy is known to
        // be weaker: a write would wait up to a second, past the fail-fast timeouts.
        assert!(p((7, 4, 1), true, Some("no")).strict_confirm().is_err());
    }

    #[test]
    fn without_config_strict_needs_waitaof() {
        let e = p((7, 0, 15), true, None).strict_confirm().unwrap_err();
        assert!(
            e.contains("CONFIG GET is unavailable") && e.contains("WAITAOF"),
            "{e}"
        );
        assert_eq!(
            p((8, 0, 2), true, None).strict_confirm(),
            Ok(Confirm::WaitAof)
        );
        let e = p((8, 0, 2), false, None).strict_confirm().unwrap_err();
        assert!(
            e.contains("aof_enabled:0") && e.contains("appendonly yes"),
            "{e}"
        );
    }

    #[test]
    fn info_and_version_parsing() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "redis"), None);
        assert_eq!(parse_version("7.0.15"), (7, 0, 15));
        assert_eq!(parse_version("7.2"), (7, 2, 0));
        assert_eq!(parse_version("x"), (0, 0, 0));
        assert!(parse_version("7.2.4") >= (7, 2, 0) && parse_version("7.0.15") < (7, 2, 0));
        let pers = "# Persistence\r\nloading:0\r\naof_enabled:1\r\n";
        assert_eq!(info_field(pers, "aof_enabled"), Some("1"));
    }

    #[test]
    fn outages_are_unavailable_other_errors_backend() {
        use redis::{ErrorKind, RedisError, ServerErrorKind};
        for k in [
            std::io::ErrorKind::ConnectionRefused,
            std::io::ErrorKind::TimedOut,
            std::io::ErrorKind::BrokenPipe,
            std::io::ErrorKind::UnexpectedEof,
        ] {
            let e = RedisError::from(std::io::Error::from(k));
            assert!(matches!(redis_err(e), StoreError::Unavailable(_)), "{k:?}");
        }
        let loading = RedisError::from((
            ErrorKind::Server(ServerErrorKind::BusyLoading),
            "Redis is loading the dataset in memory",
        ));
        assert!(matches!(redis_err(loading), StoreError::Unavailable(_)));
        let err = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "wrong kind of value",
        ));
        assert!(matches!(redis_err(err), StoreError::Backend(_)));
        let ty = RedisError::from((ErrorKind::UnexpectedReturnType, "not a string"));
        assert!(matches!(redis_err(ty), StoreError::Backend(_)));
    }
}
