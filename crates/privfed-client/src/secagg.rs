//! A device's side of secure aggregation over HTTP: join a round, then answer each stage with the
//! protocol's client state machine ([`privfed_secagg::Client`]), long-polling the server for the
//! message that opens the next stage. Requests that fail in transit or meet a 503 are retried
//! (the server answers a retried message as a duplicate), so a client rides out a server
//! restart.
//!
//! The protocol's secrets come from a ChaCha20 generator seeded by the operating system.

use std::time::{Duration, Instant};

use privfed_secagg::messages::encode;
use privfed_secagg::{
    Aggregate, Client, ClientId, ClientPolicy, Credentials, DeviceKey, Roster, RosterCheck,
    RoundConfig, Stage, ThreatModel,
};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;
use serde::Deserialize;

/// Why a secure-aggregation client failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecAggClientError {
    /// Transport failure that outlasted the retries.
    #[error("http: {0}")]
    Http(#[from] reqwest::Error),
    /// The server answered with an error.
    #[error("server answered {status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Body (the server's JSON error).
        body: String,
    },
    /// The protocol refused a message (a lying or broken server, or bad input).
    #[error("protocol: {0}")]
    Protocol(#[from] privfed_secagg::SecAggError),
    /// The server stayed unreachable longer than the retry budget.
    #[error("gave up after {0:?} of retries")]
    GaveUp(Duration),
    /// A bad base URL or option.
    #[error("invalid: {0}")]
    Invalid(String),
    /// A JSON answer of the server (a join, a round's view, a result) is longer than its cap
    /// ([`MAX_JSON_LEN`], [`MAX_VIEW_LEN`]); it was not read. Stage messages over their
    /// round's cap are [`privfed_secagg::SecAggError::TooLarge`] (in
    /// [`SecAggClientError::Protocol`]).
    #[error("the server's {what} is larger than {cap} bytes (at least {len})")]
    TooLarge {
        /// Which answer.
        what: &'static str,
        /// Its length as announced, or the bytes read when reading stopped.
        len: u64,
        /// The cap.
        cap: u64,
    },
}

/// Cap on a JSON answer that carries no per-client list (a join, a round's creation, an
/// error body, the end of a round): a configuration and a token are well under 64 KiB.
pub const MAX_JSON_LEN: usize = 64 << 10;

/// Cap on a round's public view and its result: they carry the roster (one device key per
/// enrolled client, about 70 bytes of JSON each) or the sum (up to `dim` integers of 20
/// digits); 64 MiB holds a roster of 10^5 devices and a sum of 3·10^6 coordinates.
pub const MAX_VIEW_LEN: usize = 64 << 20;

/// Reads `r`'s body, refusing it unread when its Content-Length exceeds `cap` and, for a
/// chunked or unannounced body, stopping at the first chunk that takes it past `cap`: no more
/// than `cap` plus one chunk is ever buffered.
async fn read_capped(
    mut r: reqwest::Response,
    cap: usize,
    too_large: impl Fn(u64) -> SecAggClientError,
) -> Result<Vec<u8>, SecAggClientError> {
    if let Some(len) = r.content_length()
        && len > cap as u64
    {
        return Err(too_large(len));
    }
    let mut body = Vec::new();
    while let Some(chunk) = r.chunk().await? {
        if body.len() + chunk.len() > cap {
            return Err(too_large((body.len() + chunk.len()) as u64));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// [`read_capped`] of a JSON answer, parsed.
async fn json_capped<T: serde::de::DeserializeOwned>(
    r: reqwest::Response,
    cap: usize,
    what: &'static str,
) -> Result<T, SecAggClientError> {
    let body = read_capped(r, cap, |len| SecAggClientError::TooLarge {
        what,
        len,
        cap: cap as u64,
    })
    .await?;
    serde_json::from_slice(&body).map_err(|e| SecAggClientError::Invalid(format!("{what}: {e}")))
}

/// An error body, read up to [`MAX_JSON_LEN`] (longer ones are cut: they are only shown).
async fn error_text(r: reqwest::Response) -> String {
    match read_capped(r, MAX_JSON_LEN, |len| SecAggClientError::TooLarge {
        what: "error body",
        len,
        cap: MAX_JSON_LEN as u64,
    })
    .await
    {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => e.to_string(),
    }
}

/// A client's place in a round.
#[derive(Debug, Clone, Deserialize)]
pub struct Joined {
    /// Its id.
    pub client: ClientId,
    /// Its bearer token.
    pub token: String,
    /// The round's configuration.
    pub config: RoundConfig,
    /// The round id.
    #[serde(skip)]
    pub round: String,
}

/// How a client's part in a round ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The round finished.
    Finished,
    /// The round ended otherwise for this client (aborted, or it was left out): the reason.
    Over(String),
    /// The client stopped before the given stage (a simulated dropout).
    Dropped(Stage),
}

/// What a client did in a round.
#[derive(Debug, Clone)]
pub struct Participation {
    /// Its id.
    pub client: ClientId,
    /// How it ended.
    pub outcome: Outcome,
    /// Bytes of message bodies sent.
    pub bytes_up: u64,
    /// Bytes of message bodies received.
    pub bytes_down: u64,
    /// Time spent in the protocol's computations (keys, shares, masks).
    pub compute: Duration,
}

/// HTTP client of the coordinator's `/v1/secagg` routes.
#[derive(Debug, Clone)]
pub struct SecAggClient {
    http: reqwest::Client,
    base: String,
    retry_budget: Duration,
    policy: ClientPolicy,
}

/// The answer to a round creation.
#[derive(Debug, Clone, Deserialize)]
pub struct Created {
    /// Round id.
    pub round: String,
    /// Its configuration.
    pub config: RoundConfig,
    /// An honest-but-curious round's join tickets, one per client, each admitting one client
    /// ([`SecAggClient::join_with_ticket`]); empty for active and open rounds.
    #[serde(default)]
    pub join_tickets: Vec<String>,
}

impl SecAggClient {
    /// A client of the server at `base_url` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base_url: &str) -> Result<Self, SecAggClientError> {
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(SecAggClientError::Invalid(format!(
                "base URL `{base_url}` must start with http:// or https://"
            )));
        }
        Ok(SecAggClient {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()?,
            base: base_url.trim_end_matches('/').to_string(),
            retry_budget: Duration::from_secs(120),
            policy: ClientPolicy::default(),
        })
    }

    /// How long transport failures and 503s are retried before giving up (default 120 s).
    pub fn with_retry_budget(mut self, budget: Duration) -> Self {
        self.retry_budget = budget;
        self
    }

    /// The rounds this client joins (default [`ClientPolicy::default`]): a round it refuses
    /// fails with [`privfed_secagg::SecAggError::Refused`] before any key is sent.
    pub fn with_policy(mut self, policy: ClientPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sends a request built by `make`, retrying transport errors and 503s within the budget.
    async fn send(
        &self,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, SecAggClientError> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(50);
        loop {
            match make().send().await {
                Ok(r) if r.status().as_u16() != 503 => return Ok(r),
                Ok(_) | Err(_) if start.elapsed() < self.retry_budget => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Ok(r) => {
                    return Err(SecAggClientError::Status {
                        status: 503,
                        body: error_text(r).await,
                    });
                }
                Err(e) if e.is_timeout() || e.is_connect() || e.is_request() => {
                    return Err(SecAggClientError::GaveUp(start.elapsed()));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn check(r: reqwest::Response) -> Result<reqwest::Response, SecAggClientError> {
        if r.status().is_success() {
            Ok(r)
        } else {
            Err(SecAggClientError::Status {
                status: r.status().as_u16(),
                body: error_text(r).await,
            })
        }
    }

    /// Creates a round (admin): `body` is the JSON of `POST /v1/secagg/rounds`.
    pub async fn create_round(
        &self,
        admin_token: &str,
        body: &serde_json::Value,
    ) -> Result<Created, SecAggClientError> {
        let url = format!("{}/v1/secagg/rounds", self.base);
        let r = self
            .send(|| self.http.post(&url).bearer_auth(admin_token).json(body))
            .await?;
        json_capped(Self::check(r).await?, MAX_JSON_LEN, "round creation").await
    }

    /// Joins an open round (created with `"open": true`), which needs no credential.
    pub async fn join(&self, round: &str) -> Result<Joined, SecAggClientError> {
        self.post_join(round, None).await
    }

    /// `POST …/join` with `credential` as its body (none for an open round): the place in the
    /// round the coordinator answers.
    async fn post_join(
        &self,
        round: &str,
        credential: Option<serde_json::Value>,
    ) -> Result<Joined, SecAggClientError> {
        let url = format!("{}/v1/secagg/rounds/{round}/join", self.base);
        let r = self
            .send(|| match &credential {
                Some(body) => self.http.post(&url).json(body),
                None => self.http.post(&url),
            })
            .await?;
        let mut joined: Joined = json_capped(Self::check(r).await?, MAX_JSON_LEN, "join").await?;
        joined.round = round.to_string();
        Ok(joined)
    }

    /// Joins an honest-but-curious round with one of its join tickets (handed out by the
    /// administrator who created the round; a ticket admits one client).
    pub async fn join_with_ticket(
        &self,
        round: &str,
        ticket: &str,
    ) -> Result<Joined, SecAggClientError> {
        self.post_join(round, Some(serde_json::json!({ "ticket": ticket })))
            .await
    }

    /// Joins an active round as an enrolled device: fetches the round's public view, verifies
    /// its roster against the enrollment `authority` this device trusts (signature, not expired
    /// by this machine's clock, version at least `min_version` — the highest version this
    /// device has accepted before, 0 if none) and that the round's configuration names that
    /// roster, then joins with the device's signature of the round. Returns the place in the
    /// round and the credentials to take part with; the device should keep
    /// `credentials.roster`'s version as its next `min_version`.
    pub async fn join_enrolled(
        &self,
        round: &str,
        device: DeviceKey,
        authority: &[u8; 32],
        min_version: u64,
    ) -> Result<(Joined, Credentials), SecAggClientError> {
        #[derive(Deserialize)]
        struct View {
            config: RoundConfig,
            roster: Option<Roster>,
        }
        let view: View = serde_json::from_value(self.status(round).await?)
            .map_err(|e| SecAggClientError::Invalid(format!("round view: {e}")))?;
        let Some(roster) = view.roster else {
            return Err(privfed_secagg::SecAggError::Policy(
                "the round has no roster: it is not an active round an enrolled device joins"
                    .into(),
            )
            .into());
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let trusted = roster.verify(authority, RosterCheck { now, min_version })?;
        view.config.validate()?;
        self.policy.check(&view.config)?;
        if view.config.threat_model
            != (ThreatModel::Active {
                roster: Some(trusted.digest()),
            })
        {
            return Err(privfed_secagg::SecAggError::Policy(
                "the round's configuration does not name the roster it serves".into(),
            )
            .into());
        }
        let body = serde_json::json!({
            "device": device.verifying_key(),
            "signature": device.sign_join(&view.config.binding(), round).to_vec(),
        });
        let joined = self.post_join(round, Some(body)).await?;
        if joined.config != view.config {
            return Err(privfed_secagg::SecAggError::Policy(
                "the round's configuration changed between its view and the join".into(),
            )
            .into());
        }
        Ok((
            joined,
            Credentials {
                device,
                roster: Some(trusted),
            },
        ))
    }

    /// The round's public state (JSON).
    pub async fn status(&self, round: &str) -> Result<serde_json::Value, SecAggClientError> {
        let url = format!("{}/v1/secagg/rounds/{round}", self.base);
        let r = self.send(|| self.http.get(&url)).await?;
        json_capped(Self::check(r).await?, MAX_VIEW_LEN, "round view").await
    }

    /// Closes the round's current stage now (admin): the operator's deadline.
    pub async fn close_stage(
        &self,
        admin_token: &str,
        round: &str,
    ) -> Result<(), SecAggClientError> {
        let url = format!("{}/v1/secagg/rounds/{round}/close", self.base);
        let r = self
            .send(|| self.http.post(&url).bearer_auth(admin_token))
            .await?;
        Self::check(r).await?;
        Ok(())
    }

    /// A finished round's sum (admin).
    pub async fn result(
        &self,
        admin_token: &str,
        round: &str,
    ) -> Result<Aggregate, SecAggClientError> {
        let url = format!("{}/v1/secagg/rounds/{round}/result", self.base);
        let r = self
            .send(|| self.http.get(&url).bearer_auth(admin_token))
            .await?;
        json_capped(Self::check(r).await?, MAX_VIEW_LEN, "round result").await
    }

    /// Takes part in the round with `input` (in Z_{2^b}^d), stopping before `drop_before` if
    /// given (to simulate a device that goes away).
    pub async fn participate(
        &self,
        joined: &Joined,
        input: &[u64],
        drop_before: Option<Stage>,
    ) -> Result<Participation, SecAggClientError> {
        self.participate_with(joined, None, input, drop_before)
            .await
    }

    /// [`SecAggClient::participate`] with the device's credentials for an active round (from
    /// [`SecAggClient::join_enrolled`]); `None` for an honest-but-curious round.
    pub async fn participate_with(
        &self,
        joined: &Joined,
        credentials: Option<Credentials>,
        input: &[u64],
        drop_before: Option<Stage>,
    ) -> Result<Participation, SecAggClientError> {
        let mut rng = ChaCha20Rng::from_rng(&mut rand::rng());
        let mut p = Participation {
            client: joined.client,
            outcome: Outcome::Finished,
            bytes_up: 0,
            bytes_down: 0,
            compute: Duration::ZERO,
        };
        if drop_before == Some(Stage::AdvertiseKeys) {
            p.outcome = Outcome::Dropped(Stage::AdvertiseKeys);
            return Ok(p);
        }
        let t = Instant::now();
        let (mut client, first) = match credentials {
            Some(c) => Client::new_active_with_policy(
                joined.config.clone(),
                joined.client,
                c,
                &self.policy,
                &mut rng,
            )?,
            None => Client::new_with_policy(
                joined.config.clone(),
                joined.client,
                &self.policy,
                &mut rng,
            )?,
        };
        p.compute += t.elapsed();
        self.post(joined, &encode(&first), &mut p).await?;
        let next_url = format!(
            "{}/v1/secagg/rounds/{}/next?client={}&wait=30",
            self.base, joined.round, joined.client
        );
        loop {
            let Some(stage) = client.next_stage() else {
                return Ok(p);
            };
            if drop_before == Some(stage) {
                p.outcome = Outcome::Dropped(stage);
                return Ok(p);
            }
            let r = self
                .send(|| self.http.get(&next_url).bearer_auth(&joined.token))
                .await?;
            match r.status().as_u16() {
                204 => continue,
                410 => {
                    #[derive(Deserialize)]
                    struct Over {
                        status: String,
                        reason: String,
                    }
                    let over: Over = json_capped(r, MAX_JSON_LEN, "end of round").await?;
                    p.outcome = if over.status == "finished" {
                        Outcome::Finished
                    } else {
                        Outcome::Over(over.reason)
                    };
                    return Ok(p);
                }
                _ => {}
            }
            // Sized before it is read: never more than the stage's cap plus one chunk.
            let cap = client.max_message_len();
            let body = read_capped(Self::check(r).await?, cap, |len| {
                privfed_secagg::SecAggError::TooLarge {
                    stage,
                    len,
                    cap: cap as u64,
                }
                .into()
            })
            .await?;
            p.bytes_down += body.len() as u64;
            let t = Instant::now();
            let answer = client
                .handle_bytes(&body, input, &mut rng)
                .map(|m| encode(&m));
            p.compute += t.elapsed();
            self.post(joined, &answer?, &mut p).await?;
        }
    }

    async fn post(
        &self,
        joined: &Joined,
        body: &[u8],
        p: &mut Participation,
    ) -> Result<(), SecAggClientError> {
        let url = format!("{}/v1/secagg/rounds/{}/messages", self.base, joined.round);
        let r = self
            .send(|| {
                self.http
                    .post(&url)
                    .bearer_auth(&joined.token)
                    .header("content-type", "application/octet-stream")
                    .body(body.to_vec())
            })
            .await?;
        Self::check(r).await?;
        p.bytes_up += body.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Against a hostile server on a loopback socket: a tiny HTTP/1.1 server that answers the
    //! join, accepts the first message, then answers the stage request with a huge body.
    use super::*;
    use privfed_secagg::{GraphSpec, SecAggError};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// How the hostile server answers the stage request.
    #[derive(Clone, Copy)]
    enum Huge {
        /// `Content-Length: 1 GiB`, then zeros.
        Announced,
        /// Chunked, 16 KiB chunks of zeros, up to 1 GiB.
        Chunked,
    }

    const GIB: u64 = 1 << 30;

    struct Hostile {
        base: String,
        /// Body bytes written by the stage answer before the client hung up.
        written: Arc<AtomicU64>,
        /// Client messages posted.
        posted: Arc<AtomicU64>,
    }

    async fn read_head(s: &mut tokio::net::TcpStream) -> Option<(String, usize)> {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            if s.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            buf.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&buf).into_owned();
        let len = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap_or(0))
            })
            .unwrap_or(0);
        Some((head, len))
    }

    async fn hostile(config: RoundConfig, huge: Huge) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let written = Arc::new(AtomicU64::new(0));
        let posted = Arc::new(AtomicU64::new(0));
        let (w, p) = (written.clone(), posted.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let (w, p, config) = (w.clone(), p.clone(), config.clone());
                tokio::spawn(async move {
                    let Some((head, len)) = read_head(&mut s).await else {
                        return;
                    };
                    let mut body = vec![0u8; len];
                    if s.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let ok = |b: String| {
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n{b}",
                            b.len()
                        )
                    };
                    if head.contains("/join") {
                        let j = serde_json::json!({"client": 1, "token": "t", "config": config});
                        let _ = s.write_all(ok(j.to_string()).as_bytes()).await;
                    } else if head.contains("/messages") {
                        p.fetch_add(1, Ordering::SeqCst);
                        let _ = s.write_all(ok("{}".into()).as_bytes()).await;
                    } else if head.contains("/next") {
                        let zeros = vec![0u8; 16 << 10];
                        let head = match huge {
                            Huge::Announced => format!(
                                "HTTP/1.1 200 OK\r\ncontent-length: {GIB}\r\n\
                                 connection: close\r\n\r\n"
                            ),
                            Huge::Chunked => "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\
                                              connection: close\r\n\r\n"
                                .to_string(),
                        };
                        if s.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        while w.load(Ordering::SeqCst) < GIB {
                            let r = match huge {
                                Huge::Announced => s.write_all(&zeros).await,
                                Huge::Chunked => {
                                    let mut c = format!("{:x}\r\n", zeros.len()).into_bytes();
                                    c.extend_from_slice(&zeros);
                                    c.extend_from_slice(b"\r\n");
                                    s.write_all(&c).await
                                }
                            };
                            if r.is_err() {
                                return;
                            }
                            w.fetch_add(zeros.len() as u64, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        Hostile {
            base,
            written,
            posted,
        }
    }

    fn config(clients: u32, threshold: u32) -> RoundConfig {
        RoundConfig {
            session_id: [1; 32],
            clients,
            threshold,
            bits: 16,
            dim: 4,
            graph: GraphSpec::Complete,
            threat_model: ThreatModel::HonestButCurious,
        }
    }

    async fn run(h: &Hostile) -> Result<Participation, SecAggClientError> {
        let c = SecAggClient::new(&h.base)
            .unwrap()
            .with_retry_budget(Duration::from_secs(2));
        let joined = c.join("r").await?;
        tokio::time::timeout(
            Duration::from_secs(60),
            c.participate(&joined, &[1, 2, 3, 4], None),
        )
        .await
        .expect("the client gives up on a huge body instead of reading it")
    }

    fn cap_of(config: &RoundConfig) -> u64 {
        privfed_secagg::messages::max_server_message_len(config, Stage::ShareKeys) as u64
    }

    #[tokio::test]
    async fn an_announced_huge_body_is_refused_unread() {
        let config = config(10, 6);
        let h = hostile(config.clone(), Huge::Announced).await;
        let e = run(&h).await.unwrap_err();
        let SecAggClientError::Protocol(SecAggError::TooLarge { stage, len, cap }) = e else {
            panic!("expected TooLarge, got {e:?}");
        };
        assert_eq!((stage, len, cap), (Stage::ShareKeys, GIB, cap_of(&config)));
        assert_eq!(h.posted.load(Ordering::SeqCst), 1); // only the advertised keys
    }

    #[tokio::test]
    async fn a_streamed_huge_body_is_cut_at_the_cap() {
        let config = config(10, 6);
        let cap = cap_of(&config);
        let h = hostile(config, Huge::Chunked).await;
        let e = run(&h).await.unwrap_err();
        let SecAggClientError::Protocol(SecAggError::TooLarge { len, cap: c, .. }) = e else {
            panic!("expected TooLarge, got {e:?}");
        };
        assert_eq!(c, cap);
        // Buffered: the cap plus one chunk at most (a chunk is one read of hyper's buffer,
        // ≤ 1 MiB), not the gigabyte on offer.
        assert!(
            len > cap && len <= cap + (1 << 20),
            "read {len} bytes, cap {cap}"
        );
        // The server could push no more than the socket buffers hold once the client hung up.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let w = h.written.load(Ordering::SeqCst);
        assert!(w < 64 << 20, "the server wrote {w} bytes");
    }

    #[tokio::test]
    async fn an_unsafe_round_is_refused_before_anything_is_sent() {
        let h = hostile(config(2, 1), Huge::Announced).await;
        let e = run(&h).await.unwrap_err();
        let SecAggClientError::Protocol(SecAggError::Refused { rule, .. }) = e else {
            panic!("expected Refused, got {e:?}");
        };
        assert_eq!(rule, "min_clients");
        assert_eq!(h.posted.load(Ordering::SeqCst), 0);
        // Relaxed explicitly, the same round is joined (and then meets the huge body).
        let c = SecAggClient::new(&h.base)
            .unwrap()
            .with_policy(ClientPolicy::permissive());
        let joined = c.join("r").await.unwrap();
        let e = c
            .participate(&joined, &[1, 2, 3, 4], None)
            .await
            .unwrap_err();
        assert!(matches!(
            e,
            SecAggClientError::Protocol(SecAggError::TooLarge { .. })
        ));
        assert_eq!(h.posted.load(Ordering::SeqCst), 1);
    }
}
