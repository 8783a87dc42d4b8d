//! The connection layer: accept loop, timeouts, connection cap and graceful shutdown with a
//! deadline ([`serve_with`], configured by [`ServeConfig`]).
//!
//! Each accepted TCP connection (with `TCP_NODELAY`) is served by hyper's HTTP/1.1 connection in
//! its own task. Timeouts are enforced without a per-request allocation:
//! * a per-connection IO wrapper (`TimedIo`) knows, from a counter the service bumps, whether a
//!   request is being handled. Between requests it closes the connection if the first byte of the
//!   next request does not come within the idle timeout, or if the head of a request (from its
//!   first byte, or from accept for a new connection) is not complete within the header timeout.
//!   A write that makes no progress for the write timeout (a client that does not read its
//!   answer) fails the connection. One timer per connection, re-armed in place;
//! * the request body must arrive whole within the body timeout of its head (`DeadlineBody`);
//!   the handler then answers 408 and the connection is closed.
//!
//! The connection cap is a semaphore taken *before* `accept`: at the cap the server stops
//! accepting, so excess connections wait in the kernel's listen backlog. They hold no descriptor
//! and no memory of this process, and they are served (in order) as soon as a connection ends, a
//! timeout closing idle or slow ones; accepting-and-closing instead would turn a flood of idle
//! sockets into failed requests for honest clients.
//!
//! One client address cannot hold the slots: an accepted connection whose address bucket
//! ([`crate::ddml::ticket::client_bucket`]) already holds [`ServeConfig::max_connections_per_address`]
//! open connections is closed at once (and the defence is counted and logged,
//! [`crate::http::defence`]). Silent sockets re-opened from one address then hold at most that many
//! slots, each for at most the header timeout.
//!
//! On shutdown the listener is closed, idle connections are closed, in-flight requests finish;
//! after the shutdown deadline the remaining connections are dropped and [`serve_with`] returns,
//! so the state (and the store's lock) can be released.

use crate::ddml::api::{AppState, router};
use crate::ddml::store::Store;
use crate::http::body::BodyTimeout;
use axum::Router;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, Sleep};

/// Connection limits and timeouts of [`serve_with`]. [`Default`] gives the hardened defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeConfig {
    /// The head of a request (request line and headers) must arrive within this time of its first
    /// byte (or of accept, for a connection's first request). Default 10 s.
    pub header_timeout: Duration,
    /// A request body must arrive whole within this time of the request head (else 408 and the
    /// connection is closed). Default 30 s.
    pub body_timeout: Duration,
    /// A keep-alive connection with no request for this long is closed. Default 60 s.
    pub idle_timeout: Duration,
    /// A write that makes no progress for this long (the client does not read its answer) closes
    /// the connection. Default 30 s.
    pub write_timeout: Duration,
    /// Most connections served at once; further ones wait in the listen backlog (no descriptor,
    /// no memory) until a connection ends. Default 768 (room below the common 1,024-descriptor
    /// limit for the store, Redis connections and logs; raise with `ulimit -n`).
    pub max_connections: usize,
    /// After shutdown is requested, connections still open after this long are dropped and
    /// [`serve_with`] returns. Default 10 s.
    pub shutdown_deadline: Duration,
    /// Most connections open at once from one client address (IPv4 address, or IPv6 /64);
    /// further ones are closed at accept. Default 64.
    pub max_connections_per_address: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
            max_connections: 768,
            shutdown_deadline: Duration::from_secs(10),
            max_connections_per_address: 64,
        }
    }
}

/// Shutdown phases broadcast to connection tasks.
const RUNNING: u8 = 0;
const DRAINING: u8 = 1;
const DROP_NOW: u8 = 2;

/// Serves `state` on `listener` with the limits of `config` until `shutdown` resolves, then shuts
/// down gracefully within `config.shutdown_deadline` (see the [module documentation](self)).
pub async fn serve_with<S: Store>(
    listener: tokio::net::TcpListener,
    state: Arc<AppState<S>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    config: ServeConfig,
) -> io::Result<()> {
    let app = router(state.clone());
    let max = config.max_connections.clamp(1, u32::MAX as usize);
    let slots = Arc::new(Semaphore::new(max));
    let (phase_tx, phase_rx) = watch::channel(RUNNING);
    let open_by_address: OpenByAddress = Default::default();
    let per_address_cap = config.max_connections_per_address.max(1);
    let mut http = hyper::server::conn::http1::Builder::new();
    // Timeouts are enforced by `TimedIo` (hyper's header timer also counts idle keep-alive time).
    http.header_read_timeout(None).keep_alive(true);
    let mut shutdown = std::pin::pin!(shutdown);
    tracing::info!(
        addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        max_connections = max,
        "serving"
    );
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    drop(permit);
                    accept_error(e).await;
                    continue;
                }
            },
        };
        let Some(per_address) = PerAddress::open(&open_by_address, peer.ip(), per_address_cap)
        else {
            drop(tcp);
            drop(permit);
            state.defences.fired(
                crate::http::defence::Defence::ConnectionsPerAddress,
                Some(peer.ip()),
            );
            continue;
        };
        let _ = tcp.set_nodelay(true);
        state.metrics.connection_opened();
        let conn = Arc::new(ConnShared::default());
        let io = TokioIo::new(TimedIo::new(tcp, conn.clone(), &config));
        let svc = ConnService {
            router: app.clone(),
            conn,
            body_timeout: config.body_timeout,
            peer,
        };
        let served = http.serve_connection(io, svc);
        let phase = phase_rx.clone();
        let st = state.clone();
        tokio::spawn(async move {
            serve_connection(served, phase, &st).await;
            // The connection (and its clone of the state) is gone before the slot is returned,
            // so once every slot is back nothing of this server holds the state.
            drop(st);
            drop(per_address);
            drop(permit);
        });
    }
    drop(listener);
    tracing::info!(
        deadline_secs = config.shutdown_deadline.as_secs_f64(),
        "shutting down: no new connections, finishing in-flight requests"
    );
    let _ = phase_tx.send(DRAINING);
    // Long polls of secure-aggregation clients end now (they answer "not yet"), and the round
    // deadline tasks stop: the rounds are in the store, a restart resumes them.
    if let Some(c) = &state.secagg {
        c.shutdown();
    }
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(config.shutdown_deadline, slots.acquire_many(all)).await;
    if drained.is_err() {
        let open = max - slots.available_permits();
        tracing::warn!(
            open,
            "shutdown deadline passed: dropping the remaining connections"
        );
        let _ = phase_tx.send(DROP_NOW);
        // Dropping a connection is immediate once its task runs; bound the wait anyway.
        let _ = tokio::time::timeout(Duration::from_secs(5), slots.acquire_many(all)).await;
    }
    tracing::info!("server stopped");
    Ok(())
}

/// Open connections per client address bucket.
type OpenByAddress = Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>;

/// One open connection counted against its address bucket; dropping it uncounts it.
struct PerAddress {
    map: OpenByAddress,
    bucket: std::net::IpAddr,
}

impl PerAddress {
    /// Counts a connection from `ip`, or `None` if its bucket holds `cap` already.
    fn open(map: &OpenByAddress, ip: std::net::IpAddr, cap: usize) -> Option<Self> {
        let bucket = crate::ddml::ticket::client_bucket(ip);
        let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(bucket).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(Self {
            map: map.clone(),
            bucket,
        })
    }
}

impl Drop for PerAddress {
    fn drop(&mut self) {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.bucket) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.bucket);
            }
        }
    }
}

/// Drives one connection until it ends, closing it gracefully on [`DRAINING`] and dropping it on
/// [`DROP_NOW`].
async fn serve_connection<S: Store, F>(served: F, mut phase: watch::Receiver<u8>, st: &AppState<S>)
where
    F: Future<Output = hyper::Result<()>> + GracefulConnection,
{
    let mut served = std::pin::pin!(served);
    let mut draining = false;
    loop {
        tokio::select! {
            r = served.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            c = phase.changed() => {
                let p = if c.is_ok() { *phase.borrow_and_update() } else { DROP_NOW };
                if p == DROP_NOW {
                    break;
                }
                if p == DRAINING && !draining {
                    draining = true;
                    served.as_mut().graceful_shutdown();
                }
            }
        }
    }
    st.metrics.connection_closed();
}

/// hyper's HTTP/1 connection, for [`serve_connection`].
trait GracefulConnection {
    fn graceful_shutdown(self: Pin<&mut Self>);
}

impl<I, S> GracefulConnection for hyper::server::conn::http1::Connection<I, S>
where
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S::ResBody: HttpBody + 'static,
    <S::ResBody as HttpBody>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn graceful_shutdown(self: Pin<&mut Self>) {
        hyper::server::conn::http1::Connection::graceful_shutdown(self);
    }
}

/// Accept errors: per-connection ones (reset before accept) are ignored; others (out of
/// descriptors) are logged and retried after a pause instead of spinning.
async fn accept_error(e: io::Error) {
    use io::ErrorKind::*;
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused
    ) {
        return;
    }
    tracing::error!(error = %e, "accept failed; retrying in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// What the service tells the IO wrapper of one connection.
#[derive(Default)]
struct ConnShared {
    /// Requests whose head was parsed.
    started: AtomicU64,
    /// Requests whose handler finished (or was dropped).
    finished: AtomicU64,
}

/// The hyper service of one connection: counts requests for [`TimedIo`], puts the body deadline
/// on the request body and calls the router.
#[derive(Clone)]
struct ConnService {
    router: Router,
    conn: Arc<ConnShared>,
    body_timeout: Duration,
    /// The client's address, given to handlers as `ConnectInfo` (per-client rate limits).
    peer: std::net::SocketAddr,
}

impl hyper::service::Service<hyper::Request<Incoming>> for ConnService {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = Tracked<<Router as tower_service::Service<axum::extract::Request>>::Future>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        use tower_service::Service as _;
        self.conn.started.fetch_add(1, Ordering::Relaxed);
        let mut req = req.map(|b| axum::body::Body::new(DeadlineBody::new(b, self.body_timeout)));
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(self.peer));
        Tracked {
            inner: self.router.clone().call(req),
            _done: Done(self.conn.clone()),
        }
    }
}

/// Counts a request as finished when dropped.
struct Done(Arc<ConnShared>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.finished.fetch_add(1, Ordering::Relaxed);
    }
}

pin_project_lite::pin_project! {
    /// The router's future, counting the request as finished when it completes or is dropped.
    struct Tracked<F> {
        #[pin]
        inner: F,
        _done: Done,
    }
}

impl<F: Future> Future for Tracked<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}

/// Where a connection is between reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading a request head that started at `since` (or a new connection).
    Head,
    /// Between requests since `since` (the last response byte written).
    Idle,
    /// A handler is running; the body has its own deadline.
    Busy,
}

/// The connection IO with idle, header and write timeouts (see the [module documentation](self)).
struct TimedIo<T> {
    io: T,
    conn: Arc<ConnShared>,
    header_timeout: Duration,
    idle_timeout: Duration,
    write_timeout: Duration,
    phase: Phase,
    since: Instant,
    seen_finished: u64,
    write_stalled_since: Option<Instant>,
    timer: Pin<Box<Sleep>>,
    timer_at: Instant,
}

impl<T> TimedIo<T> {
    fn new(io: T, conn: Arc<ConnShared>, cfg: &ServeConfig) -> Self {
        let now = Instant::now();
        let first = now + cfg.header_timeout;
        Self {
            io,
            conn,
            header_timeout: cfg.header_timeout,
            idle_timeout: cfg.idle_timeout,
            write_timeout: cfg.write_timeout,
            phase: Phase::Head,
            since: now,
            seen_finished: 0,
            write_stalled_since: None,
            timer: Box::pin(tokio::time::sleep_until(first)),
            timer_at: first,
        }
    }

    /// Folds in what the service reported since the last look.
    fn update_phase(&mut self, now: Instant) {
        let finished = self.conn.finished.load(Ordering::Relaxed);
        let started = self.conn.started.load(Ordering::Relaxed);
        if started > finished {
            self.phase = Phase::Busy;
        } else if finished != self.seen_finished || self.phase == Phase::Busy {
            self.seen_finished = finished;
            self.phase = Phase::Idle;
            self.since = now;
        }
    }

    fn read_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Head => Some(self.since + self.header_timeout),
            Phase::Idle => Some(self.since + self.idle_timeout),
            Phase::Busy => None,
        }
    }

    /// Polls the connection's timer for `deadline` (with the write deadline if a write is
    /// stalled): `Ready` once it has passed.
    fn poll_deadline(&mut self, cx: &mut Context<'_>, read: Option<Instant>) -> Poll<()> {
        let write = self.write_stalled_since.map(|t| t + self.write_timeout);
        let deadline = match (read, write) {
            (Some(r), Some(w)) => r.min(w),
            (Some(d), None) | (None, Some(d)) => d,
            (None, None) => return Poll::Pending,
        };
        if deadline != self.timer_at {
            self.timer.as_mut().reset(deadline);
            self.timer_at = deadline;
        }
        self.timer.as_mut().poll(cx)
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what} timed out"))
}

impl<T: AsyncRead + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let now = Instant::now();
                    this.update_phase(now);
                    if this.phase == Phase::Idle {
                        this.phase = Phase::Head;
                        this.since = now;
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                this.update_phase(Instant::now());
                let read = this.read_deadline();
                match this.poll_deadline(cx, read) {
                    Poll::Ready(()) => Poll::Ready(Err(timed_out(match this.phase {
                        Phase::Head => "reading the request head",
                        Phase::Idle => "idle connection",
                        Phase::Busy => "writing the answer",
                    }))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> TimedIo<T> {
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Ready(Ok(n)) => {
                self.write_stalled_since = None;
                if n > 0 {
                    let now = Instant::now();
                    self.update_phase(now);
                    if self.phase == Phase::Idle {
                        self.since = now;
                    }
                    // The answer may be the last thing hyper does before waiting for the next
                    // request (its last read poll may have come while the handler ran): arm the
                    // timer for the idle deadline now, so that it wakes the connection.
                    let read = self.read_deadline();
                    if read.is_some() && self.poll_deadline(cx, read).is_ready() {
                        cx.waker().wake_by_ref();
                    }
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let now = Instant::now();
                self.update_phase(now);
                if self.write_stalled_since.is_none() {
                    self.write_stalled_since = Some(now);
                }
                let read = self.read_deadline().filter(|_| self.phase == Phase::Head);
                match self.poll_deadline(cx, read) {
                    Poll::Ready(()) => Poll::Ready(Err(timed_out("writing the answer"))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.after_write(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.after_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A request body that fails with [`BodyTimeout`] if it is not complete within its deadline. The
/// timer is created only if the body has to wait.
struct DeadlineBody {
    inner: Incoming,
    timeout: Duration,
    deadline: Instant,
    timer: Option<Pin<Box<Sleep>>>,
}

impl DeadlineBody {
    fn new(inner: Incoming, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            deadline: Instant::now() + timeout,
            timer: None,
        }
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(f) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(f.map(|r| r.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(Some(Err(Box::new(BodyTimeout(this.timeout)))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
