//! Single-use draw tickets: each draw hands the client a random ticket naming the instance it drew;
//! the update that follows presents it, so the server can check the update as a step *from that
//! instance* ([`privfed_ddml::guard::StepGuard`]) and apply it at most once (a retried post with
//! the same ticket is answered with the first outcome instead of being applied twice).
//!
//! A ticket is 128 bits that travel as 32 hex digits in the `Privfed-Ticket` header. The
//! embedded store's name the book's slot that holds it (20 bits), when it was issued, the
//! instance drawn, and carry a 64-bit tag under the store's secret key ([`Ticket`]): forging one
//! means guessing 64 bits per request. The slots form a ring of at most `max_tickets` entries, so
//! the book's memory is bounded; a ticket also expires after a TTL. The slot number reveals how
//! many draws the model served between two of a client's draws, which `/metrics` publishes
//! anyway. The ring is what makes the book cheap on the hot path: a ticket is found without
//! hashing, and the slots of tickets in flight are the few most recently written.
//!
//! **Tickets outlive a restart.** A ticket the ring does not hold but that was issued before the
//! book was made (by the process before a crash or restart) is verified by its tag against the
//! instance it names: it is fresh if that instance still holds the value it drew (the same
//! [`Instance::version`]), it is not expired, and no durable record says it was used. The
//! embedded store records each used ticket in the same commit as its update
//! ([`UsedTicket`]; the journal record, then the database at a checkpoint) and restores those
//! whose instance value is still current at start-up ([`TicketBook::restore_used`]). So a
//! retried update after a crash is applied at most once, and is applied if it was not before. A
//! ticket whose instance was overwritten before the restart is invalid after it (its value is
//! gone): the device draws again.
//!
//! **A deleted incarnation's tickets are told apart from forged ones.** A model deleted and
//! created again under its name is another model: its tickets' tags are keyed by the
//! generation. The embedded store keeps the deleted incarnation's generation and instance
//! versions for a ticket lifetime ([`FormerIncarnation`]); the new incarnation's book checks a
//! ticket it would refuse as unknown against them ([`TicketBook::with_former`]: one HMAC, on the
//! refusal path only) and refuses one that verifies as [`Refusal::OtherModel`]
//! (`ticket_for_another_model`, as the Redis store answers).

//! The rules below — which slot a draw takes, when a draw is refused, what a presented ticket is
//! worth — are defined in `privfed_ddml::ticket` ([`issue`](privfed_ddml::ticket::issue),
//! [`quota`](privfed_ddml::ticket::quota), [`redeem`](privfed_ddml::ticket::redeem)); this
//! module keeps the tickets and carries the decisions out.
//!
//! **No unused ticket is forgotten before its step time.** A full ring reuses the oldest slot
//! whose ticket was used, expired, or is [`TicketLimits::min_age`] old, looking past (at most 64)
//! younger unused ones, which stay; if there is none, the book is full and a draw is refused
//! ([`TicketsFull`], answered 429 with `Retry-After`) instead of voiding a ticket that an honest
//! device may be computing its step from. Draws are anonymous and free, so without this rule a
//! flood of draws would evict every other device's ticket; with it, a flood can only make draws
//! wait, and [`DrawQuota`] caps how much of the book one client address holds. A book holds
//! `max_tickets` unused tickets younger than the step time: with the defaults, 2¹⁷ tickets and
//! 30 s, devices that take the whole step time can draw ≈ 4,400 times a second per model, devices
//! that take 3 s ≈ 44,000 times. A used ticket is remembered (for replays) until its slot is
//! reused, i.e. for at least `max_tickets` draws.
//! Memory: [`TicketBook::SLOT_BYTES`] per slot, at most `max_tickets` slots per model
//! (at most 16 MiB with the defaults: a slot is at most 128 bytes, a test checks it).

//! The book holds a [`Weak`] reference to the drawn instance's [`Handle`] (a small allocation
//! pointing at the weights, so an outstanding ticket never keeps the weights' memory alive). The
//! store keeps a retired instance alive (up to a bound) while a ticket may still need it
//! ([`RetiredInstances`]); if it was dropped, the ticket is answered as expired and the client
//! draws again.

use privfed_ddml::ticket as rules;
use privfed_ddml::ticket::{Redeem, Refusal};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// HTTP header carrying a ticket (answer of a draw, request of an update); its home is
/// `privfed_ddml::wire`, which the device-side client reads too.
pub use privfed_ddml::wire::TICKET_HEADER;

/// Default lifetime of an unused ticket.
pub const DEFAULT_TICKET_TTL: Duration = Duration::from_secs(600);
/// Default number of tickets kept per model (a ring; see the [module documentation](self)).
pub const DEFAULT_MAX_TICKETS: usize = 1 << 17;
/// Default step time: no ticket younger than this is forgotten to make room for a new one.
pub const DEFAULT_TICKET_MIN_AGE: Duration = Duration::from_secs(30);
/// Default number of tickets one client address may hold within the step time ([`DrawQuota`]).
pub const DEFAULT_TICKETS_PER_CLIENT: usize = 1024;
/// Default memory per model for overwritten instances that tickets still refer to.
pub const DEFAULT_RETIRED_BYTES: usize = 64 << 20;

/// An instance as a ticket refers to it: its weights and its version, a random 64-bit number
/// drawn each time a value is installed (so a value that comes back, or a value of another
/// incarnation, never has the version of an earlier one). The embedded store keeps versions
/// durably with the instances, so that a ticket drawn before a restart can be checked after it.
#[derive(Debug)]
pub struct Instance {
    /// The weights.
    pub weights: Arc<[f32]>,
    /// The value's version.
    pub version: u64,
}

/// What a ticket refers to: a handle on an instance's weights and version. Tickets hold a
/// [`Weak`] of the handle; only the handle's own small allocation outlives the weights while
/// weak references remain (a `Weak<[f32]>` would keep the whole weights allocation, `4·dim`
/// bytes, alive).
pub type Handle = Arc<Instance>;

/// A new handle on `weights` at `version`.
pub fn handle(weights: &Arc<[f32]>, version: u64) -> Handle {
    Arc::new(Instance {
        weights: weights.clone(),
        version,
    })
}

/// A 128-bit draw ticket.
///
/// The embedded store's tickets ([`TicketBook`]) are laid out, from the most significant bit:
/// the book's slot (20 bits), the wall-clock millisecond of issue modulo 2³⁴ (34 bits, ≈ 199
/// days), the index of the instance drawn (10 bits) and a 64-bit tag, the first 64 bits of
/// HMAC-SHA256 under the store's secret key ([`TicketKey`]) of the model's name and generation,
/// the slot, the full issue time, the instance index and the instance's [`Instance::version`].
/// So the store can verify a ticket it has no record of (one drawn before a restart) without
/// storing it: the tag proves it issued the ticket, for that model, from the instance value
/// that is still current. The Redis store's tickets carry the issue time in the same place and
/// 94 random bits elsewhere ([`Ticket::random_issued_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket(pub u128);

/// How many slots past the oldest a full book looks at for one it may reuse.
const SCAN: usize = 64;

/// Bits of a ticket's fields (see [`Ticket`]).
const SLOT_BITS: u32 = 20;
const ISSUED_BITS: u32 = 34;
const INSTANCE_BITS: u32 = 10;
const TAG_BITS: u32 = 64;
const _: () = assert!(SLOT_BITS + ISSUED_BITS + INSTANCE_BITS + TAG_BITS == 128);
// Every instance index of a model fits the ticket's field.
const _: () = assert!(crate::ddml::model::MAX_K <= 1 << INSTANCE_BITS);

/// The most slots a book has: a ticket names its slot in 20 bits.
pub const MAX_TICKET_SLOTS: usize = 1 << SLOT_BITS;

const ISSUED_MASK: u64 = (1 << ISSUED_BITS) - 1;

impl Ticket {
    /// A fresh random ticket (all 128 bits random).
    pub fn random() -> Self {
        use rand::Rng;
        let mut rng = rand::rng();
        Ticket((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64()))
    }

    /// A fresh random ticket that carries its issue time `issued_ms` (wall-clock milliseconds,
    /// modulo 2³⁴, where a book's ticket carries it) and 94 random bits (the Redis store's): a
    /// store that no longer holds it can still tell an expired ticket from an unknown one
    /// ([`Ticket::expired`]).
    pub fn random_issued_at(issued_ms: u64) -> Self {
        let r = Self::random().0;
        let field = u128::from(ISSUED_MASK) << (INSTANCE_BITS + TAG_BITS);
        Ticket((r & !field) | (u128::from(issued_ms & ISSUED_MASK) << (INSTANCE_BITS + TAG_BITS)))
    }

    /// Whether a ticket issued at the time it carries is at least `ttl` old at `now_ms` (by the
    /// server's wall clock).
    pub fn expired(self, ttl: Duration, now_ms: u64) -> bool {
        now_ms - self.issued_at(now_ms) >= ttl.as_millis() as u64
    }

    /// A ticket from its fields (`issued` is taken modulo 2³⁴).
    fn compose(slot: u32, issued_ms: u64, instance: u32, tag: u64) -> Self {
        Ticket(
            (u128::from(slot) << (128 - SLOT_BITS))
                | (u128::from(issued_ms & ISSUED_MASK) << (INSTANCE_BITS + TAG_BITS))
                | (u128::from(instance) << TAG_BITS)
                | u128::from(tag),
        )
    }

    /// The slot a book's ticket names.
    fn slot(self) -> usize {
        (self.0 >> (128 - SLOT_BITS)) as usize
    }

    /// The issue time's low 34 bits (milliseconds).
    fn issued_low(self) -> u64 {
        ((self.0 >> (INSTANCE_BITS + TAG_BITS)) as u64) & ISSUED_MASK
    }

    /// The index of the instance drawn.
    fn instance(self) -> usize {
        ((self.0 >> TAG_BITS) as usize) & ((1 << INSTANCE_BITS) - 1)
    }

    /// The authentication tag.
    fn tag(self) -> u64 {
        self.0 as u64
    }

    /// The full issue time (wall-clock milliseconds) of a ticket seen at `now_ms`: the latest
    /// time not after `now_ms` with the ticket's low bits.
    fn issued_at(self, now_ms: u64) -> u64 {
        now_ms.wrapping_sub(now_ms.wrapping_sub(self.issued_low()) & ISSUED_MASK)
    }

    /// The ticket as the value of a `Privfed-Ticket` header (32 lowercase hex digits).
    pub fn header_value(self) -> axum::http::HeaderValue {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = HEX[((self.0 >> (4 * (31 - i))) & 0xf) as usize];
        }
        axum::http::HeaderValue::from_bytes(&out).expect("hex digits are a valid header value")
    }

    /// Parses 32 hex digits (either case); `None` otherwise.
    pub fn parse(s: &str) -> Option<Self> {
        if s.len() != 32 {
            return None;
        }
        s.bytes()
            .try_fold(0u128, |acc, b| {
                let digit = match b {
                    b'0'..=b'9' => b - b'0',
                    b'a'..=b'f' => b - b'a' + 10,
                    b'A'..=b'F' => b - b'A' + 10,
                    _ => return None,
                };
                Some((acc << 4) | u128::from(digit))
            })
            .map(Ticket)
    }
}

impl std::fmt::Display for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// The embedded store's secret for ticket tags: 256 random bits, drawn when the store is
/// created and kept in its database, so that tickets outlive the process.
#[derive(Clone)]
pub struct TicketKey([u8; 32]);

impl std::fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TicketKey(..)")
    }
}

impl TicketKey {
    /// A fresh key from the operating system's CSPRNG-seeded thread generator.
    pub fn random() -> Self {
        use rand::Rng;
        let mut k = [0u8; 32];
        rand::rng().fill_bytes(&mut k);
        Self(k)
    }

    /// The key from its 32 stored bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Its 32 bytes, for storage.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0
    }
}

/// Tags one model's tickets: HMAC-SHA256 keyed by the store's [`TicketKey`], with the model's
/// name and generation absorbed once.
#[derive(Clone)]
pub struct TicketMinter {
    mac: hmac::Hmac<sha2::Sha256>,
}

impl std::fmt::Debug for TicketMinter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TicketMinter(..)")
    }
}

impl TicketMinter {
    /// The minter of the model `name` in its incarnation `generation`.
    pub fn new(key: &TicketKey, name: &str, generation: u64) -> Self {
        use hmac::{KeyInit, Mac};
        let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key.0)
            .expect("HMAC takes a key of any length");
        mac.update(b"privfed-ticket-v1\0");
        mac.update(&generation.to_le_bytes());
        mac.update(&(name.len() as u64).to_le_bytes());
        mac.update(name.as_bytes());
        Self { mac }
    }

    fn tag(&self, slot: u32, issued_ms: u64, instance: u32, version: u64) -> u64 {
        use hmac::Mac;
        let mut mac = self.mac.clone();
        mac.update(&slot.to_le_bytes());
        mac.update(&issued_ms.to_le_bytes());
        mac.update(&instance.to_le_bytes());
        mac.update(&version.to_le_bytes());
        let out = mac.finalize().into_bytes();
        u64::from_le_bytes(out[..8].try_into().expect("8 bytes"))
    }

    /// The ticket of slot `slot` issued at `issued_ms` for instance `instance` at `version`.
    fn mint(&self, slot: u32, issued_ms: u64, instance: u32, version: u64) -> Ticket {
        let tag = self.tag(slot, issued_ms, instance, version);
        Ticket::compose(slot, issued_ms, instance, tag)
    }

    /// Whether `t`, issued at `issued_ms`, is this model's ticket for `instance` at `version`.
    fn verify(&self, t: Ticket, issued_ms: u64, version: u64) -> bool {
        let (slot, instance) = (t.slot() as u32, t.instance() as u32);
        self.tag(slot, issued_ms, instance, version) == t.tag()
    }
}

/// What the embedded store keeps of a deleted incarnation of a model, so that the incarnation
/// created next under the same name can tell that incarnation's tickets
/// ([`Refusal::OtherModel`], `ticket_for_another_model`) from forged or forgotten ones
/// ([`Refusal::Unknown`]): its generation, the version of each of its instances when it was
/// deleted, and when (wall-clock milliseconds). It is kept for a ticket lifetime after the
/// deletion, durably (a ticket of it stays recognizable across a restart), and checked only on
/// the refusal path ([`TicketBook::with_former`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormerIncarnation {
    /// The deleted incarnation's [`ModelSpec::generation`](crate::ddml::model::ModelSpec).
    pub generation: u64,
    /// Its instances' [`Instance::version`]s at the deletion, by index.
    pub versions: Vec<u64>,
    /// When it was deleted (wall-clock milliseconds since the Unix epoch): it is forgotten a
    /// ticket lifetime later.
    pub deleted_ms: u64,
}

impl FormerIncarnation {
    /// Whether a ticket of it can still be presented at `now_ms` (it was deleted less than a
    /// ticket lifetime `ttl` ago); an older one is forgotten.
    pub fn relevant(&self, ttl: Duration, now_ms: u64) -> bool {
        now_ms < self.deleted_ms.saturating_add(ttl.as_millis() as u64)
    }

    /// Its stored form: generation, deletion time and each version, 8 bytes little-endian each.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + 8 * self.versions.len());
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.deleted_ms.to_le_bytes());
        for v in &self.versions {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Reads [`to_bytes`](Self::to_bytes)'s form; `None` if it is not one.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() < 16 || !b.len().is_multiple_of(8) {
            return None;
        }
        let mut words = b
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
        let generation = words.next()?;
        let deleted_ms = words.next()?;
        Some(Self {
            generation,
            versions: words.collect(),
            deleted_ms,
        })
    }
}

/// A former incarnation with the minter of its tickets.
struct Former {
    minter: TicketMinter,
    versions: Box<[u64]>,
}

impl Former {
    /// Whether `t`, issued at `issued_ms`, is a ticket of this incarnation: its tag verifies
    /// for the version its instance had at the deletion (one HMAC). Its issue time is not
    /// compared with the deletion's: a draw served while the deletion was being committed is
    /// the deleted incarnation's too.
    fn issued(&self, t: Ticket, issued_ms: u64) -> bool {
        self.versions
            .get(t.instance())
            .is_some_and(|&v| self.minter.verify(t, issued_ms, v))
    }
}

/// Limits of a [`TicketBook`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketLimits {
    /// Lifetime of an unused ticket (and how long a used one is remembered for replays).
    pub ttl: Duration,
    /// Tickets kept per model (the ring's size; at most [`MAX_TICKET_SLOTS`]).
    pub max_tickets: usize,
    /// The documented step time: a ticket younger than this is never forgotten to make room for
    /// a new one (the draw is refused instead).
    pub min_age: Duration,
    /// Memory per model for overwritten instances kept for tickets (at least `k` instances are
    /// kept whatever their size).
    pub retired_bytes: usize,
}

impl TicketLimits {
    /// How many overwritten instances of a model with `k` instances of `dim` weights are kept:
    /// `max(k, retired_bytes / (4·dim))`.
    pub fn retired_cap(&self, k: usize, dim: usize) -> usize {
        k.max(self.retired_bytes / (4 * dim.max(1)))
    }
}

impl Default for TicketLimits {
    fn default() -> Self {
        Self {
            ttl: DEFAULT_TICKET_TTL,
            max_tickets: DEFAULT_MAX_TICKETS,
            min_age: DEFAULT_TICKET_MIN_AGE,
            retired_bytes: DEFAULT_RETIRED_BYTES,
        }
    }
}

/// A used ticket as the embedded store records it durably, with the update that used it
/// (journal record, then database): a ticket drawn before a restart is checked against these
/// records after it ([`TicketBook::restore_used`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedTicket {
    /// The ticket.
    pub ticket: Ticket,
    /// The instance it drew.
    pub instance: u32,
    /// That instance's version when drawn: the record matters only while it is current.
    pub version: u64,
    /// When the ticket expires (wall-clock milliseconds since the Unix epoch).
    pub expires_ms: u64,
}

enum State<O> {
    Issued(Weak<Instance>),
    InProgress(Weak<Instance>),
    Used(O),
}

struct Slot<O> {
    ticket: u128,
    issued: Instant,
    expires: Instant,
    state: State<O>,
}

struct Book<O> {
    /// The ring: grows to the cap, then the oldest slot is reused.
    slots: Vec<Slot<O>>,
    /// The slot the next ticket takes.
    next: usize,
}

impl<O> Book<O> {
    /// The slot holding `t` (expired or not), if `t` is still there.
    fn slot_of(&mut self, t: Ticket) -> Option<&mut Slot<O>> {
        self.slots.get_mut(t.slot()).filter(|s| s.ticket == t.0)
    }
}

/// A ticket issued before this book was made (before a restart), redeemed or used since, or
/// used before (restored from the store's records).
struct Earlier<O> {
    expires_ms: u64,
    /// `None` while in progress.
    outcome: Option<O>,
}

/// The tickets of one model (see the [module documentation](self)). `O` is the outcome
/// remembered for replays.
pub struct TicketBook<O> {
    inner: Mutex<Book<O>>,
    /// Tickets from before the book was made, by their bits: redeemed since, or restored as
    /// used. Only those whose instance value is still current can verify, so this holds at most
    /// the tickets used on the instances' current values.
    earlier: Mutex<std::collections::HashMap<u128, Earlier<O>>>,
    limits: TicketLimits,
    /// Slots in the ring: `max_tickets`, at least 1, at most [`MAX_TICKET_SLOTS`].
    cap: usize,
    minter: TicketMinter,
    /// The model's incarnation deleted last under the same name, if it was deleted less than a
    /// ticket lifetime before this one was made (or loaded).
    former: Option<Former>,
    /// When the book was made, as an instant and in wall-clock milliseconds: the book's clock
    /// is the wall clock at that moment plus the monotonic time since, so it never goes back.
    made: (Instant, u64),
}

/// Wall-clock milliseconds since the Unix epoch (0 if the clock is before it).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl<O: Clone> TicketBook<O> {
    /// An empty book whose tickets `minter` tags.
    pub fn new(limits: TicketLimits, minter: TicketMinter) -> Self {
        Self {
            inner: Mutex::new(Book {
                slots: Vec::new(),
                next: 0,
            }),
            earlier: Mutex::new(std::collections::HashMap::new()),
            limits,
            cap: limits.max_tickets.clamp(1, MAX_TICKET_SLOTS),
            minter,
            former: None,
            made: (Instant::now(), wall_ms()),
        }
    }

    /// The book of an incarnation created after `former` (a deleted incarnation of the model
    /// `name`, whose tickets `key` tagged): a ticket of `former` is refused as
    /// [`Refusal::OtherModel`] instead of [`Refusal::Unknown`]. The check costs one HMAC, on
    /// the refusal path only (a ticket that neither this book nor its tag accounts for).
    pub fn with_former(mut self, key: &TicketKey, name: &str, former: FormerIncarnation) -> Self {
        self.former = Some(Former {
            minter: TicketMinter::new(key, name, former.generation),
            versions: former.versions.into_boxed_slice(),
        });
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book<O>> {
        // No code panics while holding the lock; recover the data anyway.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_earlier(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<u128, Earlier<O>>> {
        self.earlier.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The book's clock at `at` (wall-clock milliseconds, never going back).
    fn ms_at(&self, at: Instant) -> u64 {
        self.made.1 + at.saturating_duration_since(self.made.0).as_millis() as u64
    }

    /// Bytes of one slot of the ring.
    pub const SLOT_BYTES: usize = std::mem::size_of::<Slot<O>>();

    /// Issues a ticket for a draw of instance `index` (`instance` its handle). Once the ring is
    /// full, a ticket is forgotten only if it was used, expired, or is at least
    /// [`TicketLimits::min_age`] old; otherwise the book is full and nothing is forgotten.
    pub fn issue(&self, instance: &Handle, index: usize) -> Result<Ticket, TicketsFull> {
        self.issue_at(instance, index, Instant::now())
    }

    /// [`issue`](Self::issue) at time `now`.
    pub fn issue_at(
        &self,
        instance: &Handle,
        index: usize,
        now: Instant,
    ) -> Result<Ticket, TicketsFull> {
        let expires = now + self.limits.ttl;
        let state = State::Issued(Arc::downgrade(instance));
        let mut b = self.lock();
        let len = b.slots.len();
        let min_age = self.limits.min_age;
        let decision = rules::issue(len, self.cap, b.next, SCAN, min_age, |i| {
            let s = &b.slots[i];
            rules::Held {
                age: now.saturating_duration_since(s.issued),
                expired: s.expires <= now,
                used: matches!(s.state, State::Used(_)),
            }
        })?;
        let at = match decision {
            rules::Issue::Append => len,
            rules::Issue::Reuse { at } => at,
        };
        b.next = (at + 1) % self.cap;
        // A slot's tickets differ in their issue time: a slot reused within the same
        // millisecond dates its new ticket a millisecond after the previous one.
        let mut issued_ms = self.ms_at(now);
        if let Some(prev) = b.slots.get(at) {
            issued_ms = issued_ms.max(self.ms_at(prev.issued) + 1);
        }
        // `at < cap ≤ 2²⁰`, `index < MAX_K ≤ 2¹⁰`.
        let t = self
            .minter
            .mint(at as u32, issued_ms, index as u32, instance.version);
        let slot = Slot {
            ticket: t.0,
            issued: now.max(self.made.0 + Duration::from_millis(issued_ms - self.made.1)),
            expires,
            state,
        };
        if at < len {
            // The previous occupant is dropped after the lock is released.
            let old = std::mem::replace(&mut b.slots[at], slot);
            drop(b);
            drop(old);
        } else {
            b.slots.push(slot);
        }
        Ok(t)
    }

    /// Looks a ticket up and, if fresh, marks it in progress. A ticket issued before the book
    /// was made (before a restart) is checked against its tag: `current(i)` is the handle of the
    /// model's instance `i` now (`None` if there is no such instance); the ticket is fresh if it
    /// drew that very value, is not expired, and was not used before.
    pub fn redeem(
        &self,
        t: Ticket,
        current: impl FnOnce(usize) -> Option<Handle>,
    ) -> Redeem<O, Handle> {
        let now = Instant::now();
        {
            let mut b = self.lock();
            if let Some(e) = b.slot_of(t) {
                let record = match &e.state {
                    State::Used(o) => rules::Record::Used(o.clone()),
                    State::InProgress(_) => rules::Record::InProgress,
                    State::Issued(w) => rules::Record::Issued {
                        same_model: true,
                        base_available: w.strong_count() > 0,
                    },
                };
                return match rules::redeem(Some(record), e.expires <= now) {
                    rules::Redeem::Fresh(()) => match &e.state {
                        State::Issued(w) => match w.upgrade() {
                            Some(h) => {
                                e.state = State::InProgress(w.clone());
                                Redeem::Fresh(h)
                            }
                            None => Redeem::Refuse(Refusal::Overwritten),
                        },
                        _ => Redeem::InProgress,
                    },
                    rules::Redeem::Replay(o) => Redeem::Replay(o),
                    rules::Redeem::InProgress => Redeem::InProgress,
                    rules::Redeem::Refuse(r) => Redeem::Refuse(r),
                };
            }
        }
        self.redeem_earlier(t, self.ms_at(now), current)
    }

    /// A ticket the ring does not hold: valid only if it was issued before the book was made.
    fn redeem_earlier(
        &self,
        t: Ticket,
        now_ms: u64,
        current: impl FnOnce(usize) -> Option<Handle>,
    ) -> Redeem<O, Handle> {
        let issued_ms = t.issued_at(now_ms);
        let ttl_ms = self.limits.ttl.as_millis() as u64;
        // Tickets of this book are only ever found in the ring (one whose slot was reused is
        // forgotten, as before).
        if issued_ms >= self.made.1 {
            return Redeem::Refuse(Refusal::Unknown);
        }
        // The ticket's record exists if its tag verifies against the instance's current value
        // (not computed for an expired ticket, refused either way).
        let expired = now_ms - issued_ms >= ttl_ms;
        let verified = if expired {
            None
        } else {
            current(t.instance()).filter(|h| self.minter.verify(t, issued_ms, h.version))
        };
        let Some(h) = verified else {
            return Redeem::Refuse(if expired {
                Refusal::Expired
            } else if self.former.as_ref().is_some_and(|f| f.issued(t, issued_ms)) {
                // Issued by the incarnation deleted before this one: the device drew from a
                // model that is gone (`rules::Record::Issued { same_model: false, .. }`).
                Refusal::OtherModel
            } else {
                Refusal::Unknown
            });
        };
        let mut earlier = self.lock_earlier();
        let record = match earlier.get(&t.0) {
            Some(Earlier {
                outcome: Some(o), ..
            }) => rules::Record::Used(o.clone()),
            Some(Earlier { outcome: None, .. }) => rules::Record::InProgress,
            None => rules::Record::Issued {
                same_model: true,
                base_available: true,
            },
        };
        match rules::redeem(Some(record), expired) {
            rules::Redeem::Replay(o) => Redeem::Replay(o),
            rules::Redeem::InProgress => Redeem::InProgress,
            rules::Redeem::Refuse(r) => Redeem::Refuse(r),
            rules::Redeem::Fresh(()) => {
                // Forget expired ones now and then (amortized O(1) per insertion).
                if earlier.len().is_power_of_two() {
                    earlier.retain(|_, e| e.expires_ms > now_ms);
                }
                earlier.insert(
                    t.0,
                    Earlier {
                        expires_ms: issued_ms + ttl_ms,
                        outcome: None,
                    },
                );
                Redeem::Fresh(h)
            }
        }
    }

    /// The durable record of `t`'s use, once it drew instance version `version`.
    pub fn used_record(&self, t: Ticket, version: u64) -> UsedTicket {
        let now_ms = self.ms_at(Instant::now());
        UsedTicket {
            ticket: t,
            instance: t.instance() as u32,
            version,
            expires_ms: t.issued_at(now_ms) + self.limits.ttl.as_millis() as u64,
        }
    }

    /// At start-up: a ticket that was used before (a durable record whose instance version is
    /// still current) answers its first outcome.
    pub fn restore_used(&self, t: Ticket, expires_ms: u64, outcome: O) {
        if expires_ms > self.made.1 {
            self.lock_earlier().insert(
                t.0,
                Earlier {
                    expires_ms,
                    outcome: Some(outcome),
                },
            );
        }
    }

    /// Records the outcome of an in-progress ticket; replays answer it until the ticket expires.
    pub fn finish(&self, t: Ticket, outcome: O) {
        {
            let mut b = self.lock();
            if let Some(e) = b.slot_of(t) {
                e.state = State::Used(outcome);
                return;
            }
        }
        if let Some(e) = self.lock_earlier().get_mut(&t.0) {
            e.outcome = Some(outcome);
        }
    }

    /// Returns an in-progress ticket to the issued state (its update was not applied, e.g. the
    /// store was unavailable), so the client may retry with it.
    pub fn release(&self, t: Ticket) {
        {
            let mut b = self.lock();
            if let Some(e) = b.slot_of(t) {
                if let State::InProgress(w) = &e.state {
                    e.state = State::Issued(w.clone());
                }
                return;
            }
        }
        let mut earlier = self.lock_earlier();
        if earlier.get(&t.0).is_some_and(|e| e.outcome.is_none()) {
            earlier.remove(&t.0);
        }
    }

    /// Number of tickets held and not expired (outstanding, in progress or remembered); O(slots).
    pub fn len(&self) -> usize {
        let now = Instant::now();
        self.lock().slots.iter().filter(|s| s.expires > now).count()
    }

    /// Whether the book holds no ticket.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A draw refused because every ticket in the way is younger than the step time; its home is
/// `privfed_ddml::ticket`.
pub use privfed_ddml::ticket::TicketsFull;

/// The address bucket a client is counted in: its IPv4 address, or the /64 prefix of its IPv6
/// address (one subscriber's allocation, which an attacker holds whole).
pub fn client_bucket(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// The largest capacity (in draws) of an emptied [`DrawQuota`] bucket that is kept.
const KEPT_BUCKET_CAPACITY: usize = 8;

/// Caps the tickets one client address bucket ([`client_bucket`]) holds: each draw counts
/// against the client until the client posts an update that redeems a ticket, or until the step
/// time passes. A client at its cap is refused further draws (429 with `Retry-After`) until its
/// oldest draw ages out, so a few addresses cannot fill a model's [`TicketBook`] and make every
/// other device's draws wait. An honest device draws, steps and posts, and so holds one.
///
/// Memory is bounded: at most [`DrawQuota::MAX_BUCKETS`] buckets are tracked, with at most
/// `per_client` instants each; when the table is full, buckets whose draws have all aged out
/// are dropped, and if none has, a new client is not counted (the quota fails open; the book's
/// step-time rule still protects every ticket, so the worst case is that draws wait).
#[derive(Debug)]
pub struct DrawQuota {
    per_client: usize,
    window: Duration,
    buckets: Mutex<std::collections::HashMap<IpAddr, VecDeque<Instant>>>,
}

impl DrawQuota {
    /// Most client buckets tracked at once.
    pub const MAX_BUCKETS: usize = 1 << 16;

    /// A quota of `per_client` (at least 1) outstanding draws within `window` (the step time).
    pub fn new(per_client: usize, window: Duration) -> Self {
        Self {
            per_client: per_client.max(1),
            window,
            buckets: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// The cap per client.
    pub fn per_client(&self) -> usize {
        self.per_client
    }

    /// Counts a draw by `client` at `now`, or refuses it with the wait until the client's
    /// oldest counted draw ages out.
    pub fn draw_at(&self, client: IpAddr, now: Instant) -> Result<(), TicketsFull> {
        let key = client_bucket(client);
        let mut m = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= Self::MAX_BUCKETS && !m.contains_key(&key) {
            let window = self.window;
            m.retain(|_, q| {
                q.back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < window)
            });
        }
        if m.len() >= Self::MAX_BUCKETS && !m.contains_key(&key) {
            return Ok(());
        }
        let q = m.entry(key).or_default();
        while q
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.window)
        {
            q.pop_front();
        }
        let oldest_age = q
            .front()
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(*t));
        rules::quota(q.len(), oldest_age, self.per_client, self.window)?;
        q.push_back(now);
        Ok(())
    }

    /// [`draw_at`](Self::draw_at) now.
    pub fn draw(&self, client: IpAddr) -> Result<(), TicketsFull> {
        self.draw_at(client, Instant::now())
    }

    /// A ticket drawn by `client` was redeemed: the client holds one ticket fewer (its oldest
    /// counted draw is released).
    pub fn redeemed(&self, client: IpAddr) {
        let key = client_bucket(client);
        let mut m = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = m.get_mut(&key) {
            q.pop_front();
            // An emptied bucket stays, with its small allocation, for the client's next draw (an
            // honest device draws and posts in turn: removing it would free and allocate again
            // each time); one that held many draws is removed to free its memory. Empty buckets
            // count towards `MAX_BUCKETS` and are the first dropped when the table is full.
            if q.is_empty() && q.capacity() > KEPT_BUCKET_CAPACITY {
                m.remove(&key);
            }
        }
    }
}

/// Instances that were overwritten while a ticket still referred to them, kept alive so that the
/// ticket's update can be checked against what the client drew. At most `cap` are kept (those no
/// ticket refers to any more are dropped first, then the oldest), so a model's memory is at most
/// `(k + cap)·dim` floats.
pub struct RetiredInstances {
    kept: Mutex<Kept>,
    cap: usize,
}

struct Kept {
    queue: VecDeque<Handle>,
    /// Retirements since the last sweep of unreferenced instances (sweeps cost O(cap), so they
    /// run at most once per `cap / 2` retirements).
    since_sweep: usize,
}

impl RetiredInstances {
    /// Keeps at most `cap` retired instances.
    pub fn new(cap: usize) -> Self {
        Self {
            kept: Mutex::new(Kept {
                queue: VecDeque::new(),
                since_sweep: 0,
            }),
            cap,
        }
    }

    /// Called with an instance that was just overwritten: kept if a ticket refers to it.
    pub fn retire(&self, old: Handle) {
        if Arc::weak_count(&old) == 0 || self.cap == 0 {
            return;
        }
        let mut k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        // The oldest are the likeliest to be unreferenced by now: drop those at once, so the
        // queue stays short in steady state instead of growing to the cap.
        while k.queue.front().is_some_and(|f| Arc::weak_count(f) == 0) {
            k.queue.pop_front();
        }
        k.since_sweep += 1;
        if k.queue.len() >= self.cap && k.since_sweep >= self.cap / 2 {
            k.queue.retain(|a| Arc::weak_count(a) > 0);
            k.since_sweep = 0;
        }
        if k.queue.len() >= self.cap {
            k.queue.pop_front();
        }
        k.queue.push_back(old);
    }

    /// Number of instances kept.
    pub fn len(&self) -> usize {
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .queue
            .len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(x: f32) -> Handle {
        handle(&Arc::from(vec![x; 3]), x.to_bits().into())
    }

    fn minter() -> TicketMinter {
        TicketMinter::new(&TicketKey::random(), "m", 7)
    }

    fn none(_: usize) -> Option<Handle> {
        None
    }

    #[test]
    fn tickets_round_trip_as_hex_and_are_distinct() {
        let a = Ticket::random();
        let b = Ticket::random();
        assert_ne!(a, b);
        let s = a.to_string();
        assert_eq!(s.len(), 32);
        assert_eq!(Ticket::parse(&s), Some(a));
        assert_eq!(Ticket::parse("xyz"), None);
        assert_eq!(Ticket::parse(&format!("{s}0")), None);
        assert_eq!(Ticket::parse("+0000000000000000000000000000001"), None);
        assert_eq!(Ticket::parse("0000000000000000000000000000000g"), None);
        assert_eq!(
            Ticket::parse("000000000000000000000000000000Af"),
            Some(Ticket(0xaf))
        );
        assert_eq!(
            Ticket::parse("ffffffffffffffffffffffffffffffff"),
            Some(Ticket(u128::MAX))
        );
    }

    #[test]
    fn a_ticket_is_single_use_and_replays_its_outcome() {
        let book: TicketBook<&'static str> = TicketBook::new(TicketLimits::default(), minter());
        let i = inst(1.0);
        let t = book.issue(&i, 0).unwrap();
        let Redeem::Fresh(base) = book.redeem(t, none) else {
            panic!("fresh ticket")
        };
        assert!(Arc::ptr_eq(&base, &i));
        assert!(matches!(book.redeem(t, none), Redeem::InProgress));
        book.finish(t, "accepted");
        assert!(matches!(book.redeem(t, none), Redeem::Replay("accepted")));
        assert!(matches!(
            book.redeem(Ticket::random(), none),
            Redeem::Refuse(_)
        ));
    }

    /// A ticket names its slot; only the exact 128 bits redeem it, a slot reused by a newer
    /// ticket does not answer the older one (nor does finishing the older one touch it), and the
    /// header form is the display form.
    #[test]
    fn the_ring_finds_tickets_by_slot_and_checks_every_bit() {
        let book: TicketBook<&'static str> = TicketBook::new(
            TicketLimits {
                max_tickets: 4,
                min_age: Duration::ZERO,
                ..TicketLimits::default()
            },
            minter(),
        );
        let i = inst(1.0);
        let ts: Vec<Ticket> = (0..4).map(|_| book.issue(&i, 0).unwrap()).collect();
        for (n, t) in ts.iter().enumerate() {
            assert_eq!(t.slot(), n);
            assert_eq!(t.header_value().to_str().unwrap(), t.to_string());
            assert_eq!(Ticket::parse(&t.to_string()), Some(*t));
        }
        assert!(matches!(
            book.redeem(Ticket(ts[1].0 ^ 1), none),
            Redeem::Refuse(_)
        ));
        assert!(matches!(
            book.redeem(Ticket(ts[1].0 ^ (1 << 95)), none),
            Redeem::Refuse(_)
        ));
        // Slot 9 does not exist in a ring of 4.
        assert!(matches!(
            book.redeem(Ticket((9u128 << 108) | (ts[1].0 & ((1 << 108) - 1))), none),
            Redeem::Refuse(_)
        ));
        assert!(matches!(book.redeem(ts[0], none), Redeem::Fresh(_)));
        // The fifth ticket takes slot 0: the first is forgotten, even while in progress.
        let t4 = book.issue(&i, 0).unwrap();
        assert_eq!(t4.slot(), 0);
        book.finish(ts[0], "first");
        assert!(matches!(book.redeem(ts[0], none), Redeem::Refuse(_)));
        assert!(matches!(book.redeem(t4, none), Redeem::Fresh(_)));
        assert_eq!(book.len(), 4);
        // A slot reused within the same millisecond for the same instance still gets a new
        // ticket (its issue time is a millisecond later).
        let now = Instant::now();
        let a = book.issue_at(&i, 0, now).unwrap();
        let more: Vec<Ticket> = (0..4).map(|_| book.issue_at(&i, 0, now).unwrap()).collect();
        assert_eq!(more[3].slot(), a.slot());
        assert_ne!(more[3], a);
    }

    /// The fields of a ticket round-trip, and the issue time is recovered from its low bits.
    #[test]
    fn ticket_fields_round_trip() {
        let t = Ticket::compose(
            MAX_TICKET_SLOTS as u32 - 1,
            1_700_000_000_123,
            999,
            u64::MAX,
        );
        assert_eq!(t.slot(), MAX_TICKET_SLOTS - 1);
        assert_eq!(t.instance(), 999);
        assert_eq!(t.tag(), u64::MAX);
        for later in [0, 1, 600_000, ISSUED_MASK] {
            assert_eq!(t.issued_at(1_700_000_000_123 + later), 1_700_000_000_123);
        }
    }

    /// After a restart (a new book with the same key and model), a ticket of the old book is
    /// fresh once if it drew the instance value that is still current, then in progress, then
    /// answers its outcome; released, it is fresh again. A ticket whose instance has another
    /// version now, of another key, model or generation, with any bit changed, or expired, is
    /// invalid; a use restored from the store's records answers its outcome.
    #[test]
    fn a_ticket_from_before_a_restart_is_checked_by_its_tag() {
        let key = TicketKey::random();
        let limits = TicketLimits::default();
        let old: TicketBook<&'static str> =
            TicketBook::new(limits, TicketMinter::new(&key, "m", 7));
        let h = handle(&Arc::from(vec![1.0f32; 3]), 42);
        let t = old.issue(&h, 2).unwrap();
        let u = old.issue(&h, 2).unwrap();
        assert_eq!(t.instance(), 2);
        std::thread::sleep(Duration::from_millis(3));
        let new = |name: &str, generation: u64, key: &TicketKey| -> TicketBook<&'static str> {
            TicketBook::new(limits, TicketMinter::new(key, name, generation))
        };
        let book = new("m", 7, &key);
        let current = |v: u64| {
            let h = handle(&Arc::from(vec![1.0f32; 3]), v);
            move |i: usize| (i == 2).then_some(h)
        };
        let at = |i: usize| (i == 3).then(|| handle(&Arc::from(vec![1.0f32; 3]), 42));
        assert!(
            matches!(book.redeem(t, at), Redeem::Refuse(_)),
            "another instance"
        );
        assert!(
            matches!(book.redeem(t, current(43)), Redeem::Refuse(_)),
            "overwritten"
        );
        for b in [0, 63, 64, 73, 74, 107, 108, 127] {
            let forged = Ticket(t.0 ^ (1u128 << b));
            assert!(
                matches!(book.redeem(forged, current(42)), Redeem::Refuse(_)),
                "bit {b}"
            );
        }
        for other in [
            new("n", 7, &key),
            new("m", 8, &key),
            new("m", 7, &TicketKey::random()),
        ] {
            assert!(matches!(other.redeem(t, current(42)), Redeem::Refuse(_)));
        }
        assert!(matches!(book.redeem(t, current(42)), Redeem::Fresh(f) if f.version == 42));
        assert!(matches!(book.redeem(t, current(42)), Redeem::InProgress));
        book.release(t);
        assert!(matches!(book.redeem(t, current(42)), Redeem::Fresh(_)));
        book.finish(t, "accepted");
        assert!(matches!(
            book.redeem(t, current(42)),
            Redeem::Replay("accepted")
        ));
        let rec = book.used_record(t, 42);
        assert_eq!((rec.ticket, rec.instance, rec.version), (t, 2, 42));

        // Restored from the records of its use: answered, never applied again.
        std::thread::sleep(Duration::from_millis(3));
        let again = new("m", 7, &key);
        again.restore_used(t, rec.expires_ms, "accepted");
        assert!(matches!(
            again.redeem(t, current(42)),
            Redeem::Replay("accepted")
        ));
        assert!(matches!(again.redeem(u, current(42)), Redeem::Fresh(_)));

        // Expired.
        let short = TicketLimits {
            ttl: Duration::from_millis(1),
            ..limits
        };
        let old: TicketBook<()> = TicketBook::new(short, TicketMinter::new(&key, "m", 7));
        let t = old.issue(&h, 2).unwrap();
        std::thread::sleep(Duration::from_millis(3));
        let book: TicketBook<()> = TicketBook::new(short, TicketMinter::new(&key, "m", 7));
        assert!(matches!(book.redeem(t, current(42)), Redeem::Refuse(_)));
    }

    /// A model deleted and created again under its name: the new incarnation's book refuses a
    /// ticket of the deleted one as `OtherModel`, from its ring's time or from before a
    /// restart, and still refuses a forged or altered one, one of a model with another name, or
    /// one of an incarnation it was not told about as `Unknown`; an expired one is `Expired`.
    /// Its own tickets are unaffected. The former incarnation's stored form round-trips.
    #[test]
    fn a_ticket_of_the_deleted_incarnation_is_for_another_model() {
        let key = TicketKey::random();
        let limits = TicketLimits::default();
        let old: TicketBook<()> = TicketBook::new(limits, TicketMinter::new(&key, "m", 7));
        let h = handle(&Arc::from(vec![1.0f32; 3]), 42);
        let t = old.issue(&h, 2).unwrap();
        let other_name: TicketBook<()> = TicketBook::new(limits, TicketMinter::new(&key, "n", 7));
        let tn = other_name.issue(&h, 2).unwrap();
        std::thread::sleep(Duration::from_millis(3));
        let deleted = FormerIncarnation {
            generation: 7,
            versions: vec![1, 2, 42],
            deleted_ms: wall_ms(),
        };
        assert_eq!(
            FormerIncarnation::from_bytes(&deleted.to_bytes()),
            Some(deleted.clone())
        );
        assert_eq!(FormerIncarnation::from_bytes(&[0; 12]), None);
        assert!(deleted.relevant(limits.ttl, deleted.deleted_ms));
        assert!(!deleted.relevant(limits.ttl, deleted.deleted_ms + 600_000));
        std::thread::sleep(Duration::from_millis(3));
        // The new incarnation's instances have new versions.
        let current =
            |i: usize| (i < 3).then(|| handle(&Arc::from(vec![1.0f32; 3]), 100 + i as u64));
        let new = TicketBook::<()>::new(limits, TicketMinter::new(&key, "m", 8)).with_former(
            &key,
            "m",
            deleted.clone(),
        );
        assert!(matches!(
            new.redeem(t, current),
            Redeem::Refuse(Refusal::OtherModel)
        ));
        for forged in [Ticket(t.0 ^ 1), Ticket(t.0 ^ (1 << 64)), Ticket::random()] {
            assert!(
                matches!(new.redeem(forged, current), Redeem::Refuse(r) if r != Refusal::OtherModel),
                "{forged}"
            );
        }
        assert!(matches!(
            new.redeem(tn, current),
            Redeem::Refuse(Refusal::Unknown)
        ));
        // Without the former incarnation, or told of another one, the ticket is unknown.
        let plain: TicketBook<()> = TicketBook::new(limits, TicketMinter::new(&key, "m", 8));
        assert!(matches!(
            plain.redeem(t, current),
            Redeem::Refuse(Refusal::Unknown)
        ));
        let wrong = TicketBook::<()>::new(limits, TicketMinter::new(&key, "m", 8)).with_former(
            &key,
            "m",
            FormerIncarnation {
                generation: 6,
                ..deleted.clone()
            },
        );
        assert!(matches!(
            wrong.redeem(t, current),
            Redeem::Refuse(Refusal::Unknown)
        ));
        // Nor if the instance it drew had another value at the deletion.
        let overwritten = TicketBook::<()>::new(limits, TicketMinter::new(&key, "m", 8))
            .with_former(
                &key,
                "m",
                FormerIncarnation {
                    versions: vec![1, 2, 43],
                    ..deleted.clone()
                },
            );
        assert!(matches!(
            overwritten.redeem(t, current),
            Redeem::Refuse(Refusal::Unknown)
        ));
        // The new incarnation's own tickets are fresh.
        let hn = current(0).unwrap();
        let own = new.issue(&hn, 0).unwrap();
        assert!(matches!(new.redeem(own, current), Redeem::Fresh(_)));
        // Expired: answered as expired, whoever issued it.
        let short = TicketLimits {
            ttl: Duration::from_millis(1),
            ..limits
        };
        let old: TicketBook<()> = TicketBook::new(short, TicketMinter::new(&key, "m", 7));
        let t = old.issue(&h, 2).unwrap();
        std::thread::sleep(Duration::from_millis(3));
        let new = TicketBook::<()>::new(short, TicketMinter::new(&key, "m", 8)).with_former(
            &key,
            "m",
            FormerIncarnation {
                deleted_ms: wall_ms(),
                ..deleted
            },
        );
        assert!(matches!(
            new.redeem(t, current),
            Redeem::Refuse(Refusal::Expired)
        ));
    }

    /// A full ring of tickets younger than the step time refuses draws (saying how long to
    /// wait) and forgets nothing; once the oldest is as old as the step time, or expired, its
    /// slot is reused.
    #[test]
    fn no_ticket_younger_than_the_step_time_is_forgotten() {
        let min_age = Duration::from_secs(30);
        let book: TicketBook<()> = TicketBook::new(
            TicketLimits {
                max_tickets: 3,
                min_age,
                ..TicketLimits::default()
            },
            minter(),
        );
        let i = inst(1.0);
        let t0 = Instant::now();
        let ts: Vec<Ticket> = (0..3)
            .map(|n| book.issue_at(&i, 0, t0 + Duration::from_secs(n)).unwrap())
            .collect();
        let at = t0 + Duration::from_secs(10);
        assert_eq!(
            book.issue_at(&i, 0, at),
            Err(TicketsFull {
                retry_after: Duration::from_secs(20)
            })
        );
        for t in &ts {
            assert!(matches!(book.redeem(*t, none), Redeem::Fresh(_)));
            book.release(*t);
        }
        // At the step time the oldest goes, and only it.
        let t3 = book.issue_at(&i, 0, t0 + min_age).unwrap();
        assert_eq!(t3.slot(), 0);
        assert!(matches!(book.redeem(ts[0], none), Redeem::Refuse(_)));
        assert!(matches!(book.redeem(ts[1], none), Redeem::Fresh(_)));
        assert!(book.issue_at(&i, 0, t0 + min_age).is_err());
        // A used ticket's slot may be reused at once, past younger unused ones (slot 1 is in
        // progress, slot 2 used).
        assert!(matches!(book.redeem(ts[2], none), Redeem::Fresh(_)));
        book.finish(ts[2], ());
        let t4 = book.issue_at(&i, 0, t0 + min_age).unwrap();
        assert_eq!(t4.slot(), 2);
        assert!(matches!(book.redeem(ts[1], none), Redeem::InProgress));

        // An expired ticket's slot is reused whatever the step time.
        let book: TicketBook<()> = TicketBook::new(
            TicketLimits {
                ttl: Duration::from_secs(5),
                max_tickets: 1,
                min_age,
                ..TicketLimits::default()
            },
            minter(),
        );
        book.issue_at(&i, 0, t0).unwrap();
        assert!(book.issue_at(&i, 0, t0 + Duration::from_secs(4)).is_err());
        assert!(book.issue_at(&i, 0, t0 + Duration::from_secs(5)).is_ok());
    }

    /// One address bucket holds at most `per_client` draws within the window; a redeemed ticket
    /// frees one; an aged-out draw frees one; other clients are unaffected; IPv6 clients are
    /// counted by /64 and IPv4-mapped addresses as IPv4.
    #[test]
    fn the_draw_quota_caps_each_client_bucket() {
        let q = DrawQuota::new(2, Duration::from_secs(30));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        q.draw_at(a, t0).unwrap();
        q.draw_at(a, t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(
            q.draw_at(a, t0 + Duration::from_secs(10)),
            Err(TicketsFull {
                retry_after: Duration::from_secs(20)
            })
        );
        q.draw_at(b, t0 + Duration::from_secs(10)).unwrap();
        q.redeemed(a);
        q.draw_at(a, t0 + Duration::from_secs(10)).unwrap();
        assert!(q.draw_at(a, t0 + Duration::from_secs(11)).is_err());
        // The draw at 1 s ages out at 31 s.
        q.draw_at(a, t0 + Duration::from_secs(31)).unwrap();

        let v6a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let v6b: IpAddr = "2001:db8:1:2:bbbb::7".parse().unwrap();
        let v6c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        q.draw_at(v6a, t0).unwrap();
        q.draw_at(v6b, t0).unwrap();
        assert!(q.draw_at(v6a, t0).is_err(), "same /64");
        q.draw_at(v6c, t0).unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.2".parse().unwrap();
        assert_eq!(client_bucket(mapped), b);
        q.draw_at(mapped, t0 + Duration::from_secs(10)).unwrap();
        assert!(q.draw_at(b, t0 + Duration::from_secs(10)).is_err());
    }

    /// The documented memory per slot.
    #[test]
    fn a_slot_is_small() {
        let bytes = TicketBook::<crate::ddml::store::SubmitOutcome>::SLOT_BYTES;
        assert!(bytes <= 128, "{bytes} bytes per slot");
    }

    #[test]
    fn released_tickets_can_be_retried() {
        let book: TicketBook<()> = TicketBook::new(TicketLimits::default(), minter());
        let i = inst(1.0);
        let t = book.issue(&i, 0).unwrap();
        assert!(matches!(book.redeem(t, none), Redeem::Fresh(_)));
        book.release(t);
        assert!(matches!(book.redeem(t, none), Redeem::Fresh(_)));
    }

    #[test]
    fn expiry_cap_and_dropped_instances_invalidate() {
        let book: TicketBook<()> = TicketBook::new(
            TicketLimits {
                ttl: Duration::ZERO,
                max_tickets: 10,
                ..TicketLimits::default()
            },
            minter(),
        );
        let i = inst(1.0);
        let t = book.issue(&i, 0).unwrap();
        assert!(matches!(book.redeem(t, none), Redeem::Refuse(_)));

        let book: TicketBook<()> = TicketBook::new(
            TicketLimits {
                ttl: Duration::from_secs(60),
                max_tickets: 3,
                min_age: Duration::ZERO,
                ..TicketLimits::default()
            },
            minter(),
        );
        let ts: Vec<Ticket> = (0..5).map(|_| book.issue(&i, 0).unwrap()).collect();
        assert!(book.len() <= 3);
        assert!(matches!(book.redeem(ts[0], none), Redeem::Refuse(_)));
        assert!(matches!(book.redeem(ts[4], none), Redeem::Fresh(_)));

        let j = inst(2.0);
        let t = book.issue(&j, 0).unwrap();
        drop(j);
        assert!(matches!(book.redeem(t, none), Redeem::Refuse(_)));
    }

    /// An outstanding ticket does not keep the weights' memory: once the instance is gone, only
    /// the handle's small allocation remains.
    #[test]
    fn tickets_do_not_pin_the_weights() {
        let book: TicketBook<()> = TicketBook::new(TicketLimits::default(), minter());
        let weights: Arc<[f32]> = Arc::from(vec![1.0f32; 1000]);
        let h = handle(&weights, 0);
        let t = book.issue(&h, 0).unwrap();
        assert_eq!(Arc::weak_count(&weights), 0);
        drop(h);
        assert_eq!(
            Arc::strong_count(&weights),
            1,
            "only the test's own reference is left"
        );
        assert!(matches!(book.redeem(t, none), Redeem::Refuse(_)));
    }

    #[test]
    fn the_retired_cap_is_a_memory_budget_but_at_least_k() {
        let l = TicketLimits::default();
        assert_eq!(l.retired_cap(20, 387), (64 << 20) / (4 * 387));
        assert_eq!(l.retired_cap(20, 1 << 22), 20);
    }

    #[test]
    fn unreferenced_instances_are_swept_before_referenced_ones_are_dropped() {
        let book: TicketBook<()> = TicketBook::new(TicketLimits::default(), minter());
        let retired = RetiredInstances::new(4);
        let keep = inst(9.0);
        let t = book.issue(&keep, 0).unwrap();
        retired.retire(keep);
        // Three more whose tickets are then used (no reference left).
        for x in 0..3 {
            let a = inst(x as f32);
            let u = book.issue(&a, 0).unwrap();
            retired.retire(a);
            let Redeem::Fresh(_) = book.redeem(u, none) else {
                panic!("fresh")
            };
            book.finish(u, ());
        }
        // Full: the next retirement sweeps the three unreferenced ones, keeping the first.
        let b = inst(5.0);
        let tb = book.issue(&b, 0).unwrap();
        retired.retire(b);
        assert_eq!(retired.len(), 2);
        // Once the oldest is used, it goes at the next retirement.
        let Redeem::Fresh(_) = book.redeem(t, none) else {
            panic!("fresh")
        };
        book.finish(t, ());
        let Redeem::Fresh(_) = book.redeem(tb, none) else {
            panic!("fresh")
        };
        book.finish(tb, ());
        let c = inst(6.0);
        let _tc = book.issue(&c, 0).unwrap();
        retired.retire(c);
        assert_eq!(retired.len(), 1);
    }

    #[test]
    fn retired_instances_are_kept_only_while_referenced_and_up_to_the_cap() {
        let book: TicketBook<()> = TicketBook::new(TicketLimits::default(), minter());
        let retired = RetiredInstances::new(2);
        let a = inst(1.0);
        let t = book.issue(&a, 0).unwrap();
        retired.retire(a);
        assert!(matches!(book.redeem(t, none), Redeem::Fresh(_)));
        let unreferenced = inst(5.0);
        let w = Arc::downgrade(&unreferenced);
        drop(w);
        retired.retire(unreferenced);
        assert_eq!(retired.len(), 1);
        let (b, c) = (inst(2.0), inst(3.0));
        let (tb, tc) = (book.issue(&b, 0).unwrap(), book.issue(&c, 0).unwrap());
        retired.retire(b);
        retired.retire(c);
        assert_eq!(retired.len(), 2);
        assert!(matches!(book.redeem(tb, none), Redeem::Fresh(_)));
        assert!(matches!(book.redeem(tc, none), Redeem::Fresh(_)));
    }
}
