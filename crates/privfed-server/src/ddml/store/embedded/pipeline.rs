//! The group-commit pipeline: operations waiting for their commit, who commits them (the writer
//! thread or a worker about to park, [`CommitPacing`]), and the writer thread.

use super::*;

/// How long the writer thread of a [`CommitPacing::WhenIdle`] store keeps checking every
/// `max_delay` after it last saw a pending operation, instead of waiting to be woken by the next
/// one: under load it is then never woken per batch.
pub(super) const WRITER_LINGER: Duration = Duration::from_millis(100);

/// Why writes are refused once the writer thread has ended.
pub(super) const WRITER_STOPPED: &str = "the writer thread has stopped";

/// Operations waiting for their group commit, and whoever commits them: the thread holding
/// `writer`, i.e. the writer thread or a runtime worker about to park ([`IdleSignal::notify`]).
pub(super) struct Pipeline {
    pub(super) pending: Mutex<Pending>,
    /// Taken before `pending` whenever both are held, so batches commit in queue order.
    pub(super) writer: Mutex<WriterCore>,
    /// [`CommitPacing::WhenIdle`]'s maximum delay; `None` is [`CommitPacing::Eager`].
    pub(super) max_delay: Option<Duration>,
    /// The writer thread, to wake.
    pub(super) thread: OnceLock<std::thread::Thread>,
    pub(super) failure: Failure,
    /// When the commit under way started (`None` when none is).
    pub(super) committing_since: Mutex<Option<Instant>>,
}

#[derive(Default)]
pub(super) struct Pending {
    pub(super) ops: Vec<WriteOp>,
    /// When the oldest of `ops` was queued (`None` iff `ops` is empty).
    pub(super) since: Option<Instant>,
    /// Some of `ops` are the writer thread's to commit ([`WriteOp::inline`]).
    pub(super) writer_only: bool,
    /// A worker parked with `ops` pending: the writer thread commits them at once.
    pub(super) released: bool,
    /// The writer thread waits without a deadline: the next push wakes it.
    pub(super) writer_asleep: bool,
    /// Every handle of the store is gone: the writer thread commits what is left and stops.
    pub(super) closed: bool,
    /// The writer thread has stopped (closed, or it panicked): nothing more is taken.
    pub(super) stopped: bool,
}

/// The committer's state.
pub(super) struct WriterCore {
    pub(super) writer: Writer,
    pub(super) rng: rand::rngs::ChaCha20Rng,
}

/// How long dropping the store's last handle waits for the writer thread's final commit and
/// checkpoint (then the process may exit; an unfinished checkpoint is replayed at start-up).
pub(super) const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

/// The store's handle on its pipeline. Dropping the last one closes the pipeline and waits (at
/// most [`SHUTDOWN_WAIT`]) until the writer thread has committed what was pending, checkpointed
/// and stopped, so a process that exits right after has an empty journal.
pub(super) struct Queue {
    pub(super) pipeline: Arc<Pipeline>,
    /// Disconnected when the writer thread ends (in a mutex only to be `Sync`).
    pub(super) stopped: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.pipeline.lock_pending().closed = true;
        self.pipeline.wake_writer();
        let stopped = self.stopped.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = stopped.recv_timeout(SHUTDOWN_WAIT);
    }
}

/// Marks the pipeline stopped and refuses what is pending, when the writer thread ends (even
/// by a panic).
pub(super) struct StopGuard<'a>(&'a Pipeline);

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        let left = {
            let mut p = self.0.lock_pending();
            p.stopped = true;
            p.since = None;
            std::mem::take(&mut p.ops)
        };
        for op in left {
            op.refuse(WRITER_STOPPED);
        }
    }
}

impl Pipeline {
    pub(super) fn lock_pending(&self) -> MutexGuard<'_, Pending> {
        // Nothing panics while holding it; recover anyway.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The committer's state. A commit that panicked leaves it poisoned: the store then fails
    /// closed (it is not known what that commit wrote).
    pub(super) fn poisoned<'a>(
        &'a self,
        e: std::sync::PoisonError<MutexGuard<'a, WriterCore>>,
    ) -> MutexGuard<'a, WriterCore> {
        fail(&self.failure, "a group commit panicked".into());
        e.into_inner()
    }

    pub(super) fn lock_writer(&self) -> MutexGuard<'_, WriterCore> {
        self.writer.lock().unwrap_or_else(|e| self.poisoned(e))
    }

    pub(super) fn wake_writer(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Queues an operation for a group commit; false (and the operation dropped) if the writer
    /// thread has stopped.
    pub(super) fn push(&self, op: WriteOp) -> bool {
        let mut p = self.lock_pending();
        if p.stopped {
            return false;
        }
        if p.since.is_none() {
            p.since = Some(Instant::now());
        }
        p.writer_only |= !op.inline();
        p.ops.push(op);
        let wake = std::mem::take(&mut p.writer_asleep);
        drop(p);
        if wake {
            self.wake_writer();
        }
        true
    }

    /// A runtime worker is about to park ([`IdleSignal::notify`]).
    pub(super) fn on_park(&self) {
        let mut p = self.lock_pending();
        if p.ops.is_empty() {
            return;
        }
        if !p.writer_only {
            drop(p);
            let writer = match self.writer.try_lock() {
                Ok(w) => Some(w),
                Err(TryLockError::Poisoned(e)) => Some(self.poisoned(e)),
                Err(TryLockError::WouldBlock) => None,
            };
            if let Some(mut w) = writer {
                self.commit_pending(&mut w);
                return;
            }
            // A commit is under way: the writer thread takes this batch right after it.
            p = self.lock_pending();
            if p.ops.is_empty() {
                return;
            }
        }
        p.released = true;
        p.writer_asleep = false;
        drop(p);
        self.wake_writer();
    }

    /// Commits up to [`MAX_BATCH`] pending operations, oldest first; the caller holds the
    /// writer. What is left over is released to the writer thread.
    pub(super) fn commit_pending(&self, w: &mut WriterCore) {
        let (batch, left_over) = {
            let mut p = self.lock_pending();
            let n = p.ops.len().min(MAX_BATCH);
            let batch: Vec<WriteOp> = p.ops.drain(..n).collect();
            p.writer_only = p.ops.iter().any(|op| !op.inline());
            p.released = !p.ops.is_empty();
            if !batch.is_empty() {
                // Set before the pending lock is released, to when the batch's oldest write was
                // queued: `busy_for` never sees the batch in neither place, nor younger than it
                // is.
                *self.lock_committing() = Some(p.since.unwrap_or_else(Instant::now));
            }
            if p.ops.is_empty() {
                p.since = None;
            }
            (batch, p.released && std::mem::take(&mut p.writer_asleep))
        };
        if left_over {
            self.wake_writer();
        }
        if !batch.is_empty() {
            let WriterCore { writer, rng } = w;
            writer.commit(batch, rng);
            *self.lock_committing() = None;
        }
    }

    pub(super) fn lock_committing(&self) -> MutexGuard<'_, Option<Instant>> {
        self.committing_since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// How long the oldest write still waiting for, or inside, its commit has waited; `None`
    /// when no write is.
    pub(super) fn busy_for(&self, now: Instant) -> Option<Duration> {
        let pending = self.lock_pending().since;
        let committing = *self.lock_committing();
        [pending, committing]
            .into_iter()
            .flatten()
            .min()
            .map(|t| now.saturating_duration_since(t))
    }

    /// The writer thread: commits what is due ([`CommitPacing`]) until the store is closed,
    /// then checkpoints.
    pub(super) fn run(&self) {
        let _stop = StopGuard(self);
        let mut last_seen = Instant::now();
        loop {
            let now = Instant::now();
            let wait = {
                let mut p = self.lock_pending();
                match p.since {
                    None if p.closed => break,
                    None => match self.max_delay {
                        Some(d) if now.duration_since(last_seen) < WRITER_LINGER => Some(d),
                        _ => {
                            p.writer_asleep = true;
                            None
                        }
                    },
                    Some(since) => {
                        last_seen = now;
                        let due = match self.max_delay {
                            Some(d) if !p.released && !p.closed => since + d,
                            _ => now,
                        };
                        if due <= now {
                            drop(p);
                            self.commit_pending(&mut self.lock_writer());
                            continue;
                        }
                        Some(due - now)
                    }
                }
            };
            match wait {
                Some(d) => std::thread::park_timeout(d),
                None => std::thread::park(),
            }
        }
        self.lock_writer().writer.shut_down();
    }
}
