//! A device's side of secure aggregation over HTTP: join a round, then answer each stage with the
//! protocol's client state machine ([`privfed_secagg::Client`]), long-polling the server for the
//! message that opens the next stage. Requests that fail in transit or meet a 503 are retried
//! (the server answers a retried message as a duplicate), so a client rides out a server
//! restart.
//!
//! The protocol's secrets come from a ChaCha20 generator seeded by the operating system.

use std::time::{Duration, Instant};

use privfed_secagg::messages::{decode, encode};
use privfed_secagg::{
    Aggregate, Client, ClientId, Credentials, DeviceKey, Roster, RosterCheck, RoundConfig,
    ServerMessage, Stage, ThreatModel,
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
}

/// The answer to a round creation.
#[derive(Debug, Clone, Deserialize)]
pub struct Created {
    /// Round id.
    pub round: String,
    /// Its configuration.
    pub config: RoundConfig,
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
        })
    }

    /// How long transport failures and 503s are retried before giving up (default 120 s).
    pub fn with_retry_budget(mut self, budget: Duration) -> Self {
        self.retry_budget = budget;
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
                        body: r.text().await.unwrap_or_default(),
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
                body: r.text().await.unwrap_or_default(),
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
        Ok(Self::check(r).await?.json().await?)
    }

    /// Joins a round.
    pub async fn join(&self, round: &str) -> Result<Joined, SecAggClientError> {
        let url = format!("{}/v1/secagg/rounds/{round}/join", self.base);
        let r = self.send(|| self.http.post(&url)).await?;
        let mut joined: Joined = Self::check(r).await?.json().await?;
        joined.round = round.to_string();
        Ok(joined)
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
        let url = format!("{}/v1/secagg/rounds/{round}/join", self.base);
        let r = self.send(|| self.http.post(&url).json(&body)).await?;
        let mut joined: Joined = Self::check(r).await?.json().await?;
        joined.round = round.to_string();
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
        Ok(Self::check(r).await?.json().await?)
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
        Ok(Self::check(r).await?.json().await?)
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
            Some(c) => Client::new_active(joined.config.clone(), joined.client, c, &mut rng)?,
            None => Client::new(joined.config.clone(), joined.client, &mut rng)?,
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
                    let over: Over = r.json().await?;
                    p.outcome = if over.status == "finished" {
                        Outcome::Finished
                    } else {
                        Outcome::Over(over.reason)
                    };
                    return Ok(p);
                }
                _ => {}
            }
            let body = Self::check(r).await?.bytes().await?;
            p.bytes_down += body.len() as u64;
            let t = Instant::now();
            let answer = decode::<ServerMessage>(&body)
                .and_then(|m| client.handle(&m, input, &mut rng))
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
