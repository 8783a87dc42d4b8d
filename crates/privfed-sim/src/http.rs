//! The simulator's server side over HTTP: [`HttpModelServer`] implements
//! [`ModelServer`] with the device-side [`Client`] of `privfed-client`, so that
//! [`crate::simulate::simulate`] (and `privfed ddml simulate --server URL`) trains against a
//! live server.
//!
//! * draw = `GET /v1/models/{name}/draw` (binary); the server does not say which instance it
//!   served, so [`Drawn::index`] is `None`;
//! * submit = `POST /v1/models/{name}/updates` (binary): 202 is [`Outcome::Accepted`] (the server
//!   overwrote an instance of its own choosing, without saying which), 422 is
//!   [`Outcome::Rejected`] with the spam filter's reason;
//! * mean and intra-model variance = `GET /v1/models/{name}`.
//!
//! The server always runs Draw-and-Discard (a uniformly random instance is overwritten), so only
//! [`Strategy::DrawAndDiscard`] makes sense against it; its randomness (which
//! instance is drawn and which is overwritten) is its own, so a seeded simulation against a server
//! is not reproducible. Weights travel and are stored as `f32`.
//!
//! The simulator is synchronous and the client asynchronous: each [`HttpModelServer`] owns a
//! current-thread Tokio runtime and blocks on it for every call (one request at a time, as the
//! simulator makes them). It must therefore not be used from inside an async runtime (call it
//! from `spawn_blocking` or a plain thread); it answers [`RemoteError::InsideRuntime`] there
//! instead of panicking.

use crate::simulate::{Drawn, ModelServer};
use privfed_client::client::{Client, ClientError, ModelInfo, Submitted};
use privfed_ddml::engine::{Outcome, Strategy};
use privfed_ddml::wire::CreateModel;
use privfed_learn::LearnError;
use privfed_mechanisms::{CryptoRng, Rng};
use std::future::Future;
use tokio::runtime::{Handle, Runtime};

/// A failure of [`HttpModelServer`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The request failed or the server answered an error.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The simulation's own error (configuration, data), or a server answer of the wrong size.
    #[error(transparent)]
    Learn(#[from] LearnError),
    /// The runtime could not be built.
    #[error("cannot start the HTTP client's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// Called from inside an async runtime, where blocking on another runtime is not allowed.
    #[error(
        "HttpModelServer blocks on its own runtime and cannot be called from inside an async runtime (use spawn_blocking or a plain thread)"
    )]
    InsideRuntime,
    /// A 422 answer without a readable structured reason.
    #[error("the server rejected the update without a readable reason: {0}")]
    RejectionWithoutDetail(String),
}

/// A model on a live server, seen as a [`ModelServer`] (see the [module documentation](self)).
#[derive(Debug)]
pub struct HttpModelServer {
    client: Client,
    name: String,
    k: usize,
    dim: usize,
    /// Always `Some` until dropped (see the `Drop` impl).
    rt: Option<Runtime>,
}

impl Drop for HttpModelServer {
    /// Shuts the runtime down without waiting, which (unlike dropping it) is allowed inside an
    /// async context too. Nothing is lost: no task outlives a call.
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn runtime() -> Result<Runtime, RemoteError> {
    if Handle::try_current().is_ok() {
        return Err(RemoteError::InsideRuntime);
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RemoteError::Runtime)
}

impl HttpModelServer {
    /// Creates the model `req` on the server (`client` needs the admin token) and attaches to
    /// it. Errors if the server is unreachable, the token is wrong (403) or missing (401), the
    /// model exists (409) or the request is invalid (400).
    pub fn create(client: Client, req: &CreateModel) -> Result<Self, RemoteError> {
        let rt = runtime()?;
        rt.block_on(client.create_model(req))?;
        Self::attach_with(client, &req.name, rt)
    }

    /// Attaches to the existing model `name`, reading its `k` and `dim`. Errors if the server is
    /// unreachable or has no such model (404).
    pub fn attach(client: Client, name: &str) -> Result<Self, RemoteError> {
        Self::attach_with(client, name, runtime()?)
    }

    fn attach_with(client: Client, name: &str, rt: Runtime) -> Result<Self, RemoteError> {
        let info = rt.block_on(client.model(name))?;
        Ok(Self {
            client,
            name: name.to_string(),
            k: info.k,
            dim: info.dim,
            rt: Some(rt),
        })
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn block_on<F: Future>(&self, f: F) -> Result<F::Output, RemoteError> {
        if Handle::try_current().is_ok() {
            return Err(RemoteError::InsideRuntime);
        }
        match &self.rt {
            Some(rt) => Ok(rt.block_on(f)),
            None => unreachable!("the runtime is taken only when dropping"),
        }
    }

    /// `GET /v1/models/{name}`: counters (of every client of the model, not only this one),
    /// mean and intra-model variance, checked to have `dim` weights.
    pub fn info(&self) -> Result<ModelInfo, RemoteError> {
        let info = self.block_on(self.client.model(&self.name))??;
        if info.mean.len() != self.dim {
            return Err(LearnError::DimensionMismatch {
                what: "mean sent by the server",
                expected: self.dim,
                got: info.mean.len(),
            }
            .into());
        }
        Ok(info)
    }

    /// Deletes the model (`client` needs the admin token).
    pub fn delete(self) -> Result<(), RemoteError> {
        self.block_on(self.client.delete_model(&self.name))??;
        Ok(())
    }
}

impl ModelServer for HttpModelServer {
    type Error = RemoteError;

    fn k(&self) -> usize {
        self.k
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn strategy(&self) -> Strategy {
        Strategy::DrawAndDiscard
    }

    fn draw<R: Rng + CryptoRng + ?Sized>(&mut self, _rng: &mut R) -> Result<Drawn, RemoteError> {
        let d = self.block_on(self.client.draw(&self.name))??;
        let w = d.weights;
        if w.len() != self.dim {
            return Err(LearnError::DimensionMismatch {
                what: "instance sent by the server",
                expected: self.dim,
                got: w.len(),
            }
            .into());
        }
        Ok(Drawn {
            index: None,
            weights: w.into_iter().map(f64::from).collect(),
            ticket: d.ticket,
        })
    }

    fn submit<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        drawn: &Drawn,
        update: &[f64],
        _rng: &mut R,
    ) -> Result<Outcome, RemoteError> {
        // A weight beyond the f32 range becomes infinite and the server answers 400.
        let w: Vec<f32> = update.iter().map(|&x| x as f32).collect();
        let ticket = drawn.ticket.as_deref();
        match self.block_on(self.client.submit(&self.name, ticket, &w))?? {
            Submitted::Accepted | Submitted::Replayed => Ok(Outcome::Accepted),
            Submitted::Rejected(r) => match r.detail {
                Some(d) => Ok(Outcome::Rejected(d)),
                None => Err(RemoteError::RejectionWithoutDetail(r.message)),
            },
        }
    }

    fn mean_model(&mut self) -> Result<Vec<f64>, RemoteError> {
        Ok(self.info()?.mean)
    }

    fn intra_model_variance(&mut self) -> Result<f64, RemoteError> {
        Ok(self.info()?.intra_model_variance)
    }
}
