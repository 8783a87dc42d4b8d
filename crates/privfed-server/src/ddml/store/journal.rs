//! The embedded store's update journal: a preallocated, zero-filled file of fixed size that a
//! group commit makes durable with one positioned write and one `fdatasync`, instead of a redb
//! transaction (≈ 15 page writes and an fsync; docs/history/BENCHMARKS-history.md, "Session 18").
//!
//! **Records.** Each group commit appends one record at the current offset:
//!
//! ```text
//! magic "PFJ2" (4) · payload length u32 (4) · sequence number u64 (8) · store tag u64 (8)
//!   · CRC-32 u32 (4) · 0 u32 (4)
//! payload: entry count u32, then per entry
//!   name length u32 · name (UTF-8) · generation u64 · accepted u64 · rejected u64
//!   write count u32, then per write:
//!     instance index u32 · version u64 · byte length u32 · bytes (f32 LE)
//!   used-ticket count u32, then per ticket:
//!     ticket u128 · instance index u32 · version drawn u64 · expiry (ms since the epoch) u64
//!     · outcome length u32 · outcome (UTF-8)
//! ```
//!
//! Records of the first format (magic "PFJ1", written before tickets outlived a restart) have
//! no versions and no tickets; they are still read.
//!
//! (little-endian; the CRC covers the sequence number, the tag, the length and the payload).
//! Sequence numbers grow by one per record, across the file's whole life.
//!
//! **The store tag** is 64 random bits drawn when the journal is created and kept in redb. A
//! record is read back only if it carries it. Update weights are client data, and they are
//! written into the journal verbatim: without the tag, a client could shape an update so that
//! its bytes hold a well-formed record with a future sequence number. After a checkpoint, a
//! shorter record could end exactly where that fake header lies, and recovery would replay it,
//! bypassing the update guard. The tag is not in anything a client sees, so it cannot be forged
//! that way (one chance in 2⁶⁴).
//!
//! **Checkpoints.** When a record does not fit in what is left of the file, the store first writes
//! every instance the journal holds to redb in one durable transaction that also records the last
//! sequence number it covers, then writes on from offset 0. Records left further in the file from
//! earlier rounds have smaller sequence numbers, so [`read_after`] stops at them.
//!
//! **Recovery.** [`read_after`] returns the records that follow the checkpoint's sequence number,
//! in order, from offset 0: it stops at the first record whose magic, sequence number, length or
//! CRC is not what it expects (a torn tail of a write that was never acknowledged, or an earlier
//! round). Every acknowledged record was complete and synced before its acknowledgement, and all
//! records before it too, so every acknowledged record is among those returned.

use crate::ddml::ticket::{Ticket, UsedTicket};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The journal file inside the data directory.
pub const JOURNAL_FILE: &str = "privfed.journal";

/// The default size of the journal file (preallocated at creation).
pub const DEFAULT_JOURNAL_BYTES: u64 = 8 << 20;

/// The smallest journal file accepted.
pub const MIN_JOURNAL_BYTES: u64 = 4096;

const MAGIC: [u8; 4] = *b"PFJ2";
/// The first format's magic: no instance versions, no used tickets.
const MAGIC_V1: [u8; 4] = *b"PFJ1";
const HEADER: usize = 32;

/// A journal failure.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file could not be created, read, written or synced.
    #[error("journal {path}: {source}")]
    Io {
        /// The journal file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// A record with a valid checksum could not be decoded (a bug, not a torn write).
    #[error("journal {path}: record {seq} has a valid checksum but cannot be decoded: {why}")]
    Malformed {
        /// The journal file.
        path: String,
        /// The record's sequence number.
        seq: u64,
        /// What is wrong.
        why: String,
    },
}

/// One model's part of a record.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<B> {
    /// The model's name.
    pub name: String,
    /// The incarnation of the model the writes were validated against.
    pub generation: u64,
    /// Updates accepted in this batch (added to the stored counter).
    pub accepted: u64,
    /// Updates rejected in this batch (added to the stored counter).
    pub rejected: u64,
    /// Instance index and its new value (f32 little-endian), the batch's last value of each.
    pub writes: Vec<(u32, B)>,
    /// The version of each write's value ([`crate::ddml::ticket::Instance::version`]), in the order
    /// of `writes` (empty in a record of the first format).
    pub versions: Vec<u64>,
    /// The tickets the batch's updates of this model used, each with its outcome as replays
    /// answer it ([`crate::ddml::store::encode_outcome`]).
    pub used: Vec<(UsedTicket, std::borrow::Cow<'static, str>)>,
}

/// A record read back by [`read_after`].
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Its sequence number.
    pub seq: u64,
    /// Its entries.
    pub entries: Vec<Entry<Vec<u8>>>,
}

/// The open journal, written by the store's writer thread.
pub struct Journal {
    file: File,
    path: PathBuf,
    tag: u64,
    capacity: u64,
    offset: u64,
    next_seq: u64,
    buf: Vec<u8>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Creates (or replaces) the journal at `path`: `bytes` zeros, synced, and the directory entry
/// synced. Zeros rather than a sparse or `fallocate`d file, so that a later `fdatasync` of a
/// record flushes data only, not block allocation.
pub fn create(path: &Path, bytes: u64) -> Result<(), JournalError> {
    let bytes = bytes.max(MIN_JOURNAL_BYTES);
    let mut f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(io(path))?;
    let zeros = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        f.write_all(&zeros[..n]).map_err(io(path))?;
        left -= n as u64;
    }
    f.sync_all().map_err(io(path))?;
    sync_dir(path)
}

#[cfg(unix)]
fn sync_dir(path: &Path) -> Result<(), JournalError> {
    if let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(path))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn sync_dir(_: &Path) -> Result<(), JournalError> {
    Ok(())
}

fn checksum(seq: u64, tag: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&tag.to_le_bytes());
    h.update(&(payload.len() as u32).to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// The encoded size of a record holding `entries`.
pub fn record_len<B: AsRef<[u8]>>(entries: &[Entry<B>]) -> u64 {
    let mut n = HEADER as u64 + 4;
    for e in entries {
        n += 4 + e.name.len() as u64 + 24 + 4 + 4;
        n += e
            .writes
            .iter()
            .map(|(_, b)| 16 + b.as_ref().len() as u64)
            .sum::<u64>();
        n += e.used.iter().map(|(_, o)| 40 + o.len() as u64).sum::<u64>();
    }
    n
}

impl Journal {
    /// Opens the journal at `path` for writing from offset 0, the next record numbered
    /// `next_seq` (one more than the last checkpointed), every record carrying the store's `tag`.
    pub fn open(path: &Path, next_seq: u64, tag: u64) -> Result<Self, JournalError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io(path))?;
        let capacity = file.metadata().map_err(io(path))?.len();
        if capacity < MIN_JOURNAL_BYTES {
            return Err(JournalError::Io {
                path: path.display().to_string(),
                source: std::io::Error::other(format!(
                    "{capacity} bytes, fewer than the {MIN_JOURNAL_BYTES} a journal has"
                )),
            });
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
            tag,
            capacity,
            offset: 0,
            next_seq,
            buf: Vec::new(),
        })
    }

    /// The sequence number of the last record written (or checkpointed, before any).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Whether nothing has been written since the last [`Journal::restart`].
    pub fn is_empty(&self) -> bool {
        self.offset == 0
    }

    /// Whether a record of `len` bytes ([`record_len`]) fits after the records written.
    pub fn fits(&self, len: u64) -> bool {
        self.offset.saturating_add(len) <= self.capacity
    }

    /// Whether a record of `len` bytes fits in an empty journal.
    pub fn could_fit(&self, len: u64) -> bool {
        len <= self.capacity
    }

    /// Writes a record of `entries` after the last one and syncs it (`fdatasync`). The caller
    /// checks [`Journal::fits`] first; a record that does not fit is an error.
    pub fn append<B: AsRef<[u8]>>(&mut self, entries: &[Entry<B>]) -> Result<(), JournalError> {
        let len = record_len(entries);
        if !self.fits(len) || len - HEADER as u64 > u32::MAX as u64 {
            return Err(JournalError::Io {
                path: self.path.display().to_string(),
                source: std::io::Error::other(format!(
                    "a record of {len} bytes does not fit at offset {} of {}",
                    self.offset, self.capacity
                )),
            });
        }
        let seq = self.next_seq;
        let buf = &mut self.buf;
        buf.clear();
        buf.reserve(len as usize);
        buf.resize(HEADER, 0);
        buf.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for e in entries {
            buf.extend_from_slice(&(e.name.len() as u32).to_le_bytes());
            buf.extend_from_slice(e.name.as_bytes());
            buf.extend_from_slice(&e.generation.to_le_bytes());
            buf.extend_from_slice(&e.accepted.to_le_bytes());
            buf.extend_from_slice(&e.rejected.to_le_bytes());
            buf.extend_from_slice(&(e.writes.len() as u32).to_le_bytes());
            for (n, (j, b)) in e.writes.iter().enumerate() {
                let b = b.as_ref();
                buf.extend_from_slice(&j.to_le_bytes());
                buf.extend_from_slice(&e.versions.get(n).copied().unwrap_or(0).to_le_bytes());
                buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
                buf.extend_from_slice(b);
            }
            buf.extend_from_slice(&(e.used.len() as u32).to_le_bytes());
            for (u, o) in &e.used {
                buf.extend_from_slice(&u.ticket.0.to_le_bytes());
                buf.extend_from_slice(&u.instance.to_le_bytes());
                buf.extend_from_slice(&u.version.to_le_bytes());
                buf.extend_from_slice(&u.expires_ms.to_le_bytes());
                buf.extend_from_slice(&(o.len() as u32).to_le_bytes());
                buf.extend_from_slice(o.as_bytes());
            }
        }
        let payload_len = buf.len() - HEADER;
        let crc = checksum(seq, self.tag, &buf[HEADER..]);
        buf[..4].copy_from_slice(&MAGIC);
        buf[4..8].copy_from_slice(&(payload_len as u32).to_le_bytes());
        buf[8..16].copy_from_slice(&seq.to_le_bytes());
        buf[16..24].copy_from_slice(&self.tag.to_le_bytes());
        buf[24..28].copy_from_slice(&crc.to_le_bytes());
        write_at(&self.file, buf, self.offset).map_err(io(&self.path))?;
        self.file.sync_data().map_err(io(&self.path))?;
        self.offset += buf.len() as u64;
        self.next_seq += 1;
        Ok(())
    }

    /// After a checkpoint that covers every record written: the next record goes to offset 0.
    pub fn restart(&mut self) {
        self.offset = 0;
    }
}

#[cfg(unix)]
fn write_at(f: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, buf, offset)
}

#[cfg(not(unix))]
fn write_at(f: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut f = f;
    f.seek(SeekFrom::Start(offset))?;
    f.write_all(buf)
}

/// The records after sequence number `checkpointed` that carry the store's `tag`, in order (see
/// the [module documentation](self)).
pub fn read_after(path: &Path, checkpointed: u64, tag: u64) -> Result<Vec<Record>, JournalError> {
    let data = std::fs::read(path).map_err(io(path))?;
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut expect = checkpointed + 1;
    while let Some(h) = data.get(at..at + HEADER) {
        let len = u32::from_le_bytes(h[4..8].try_into().expect("4 bytes")) as usize;
        let seq = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
        let t = u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(h[24..28].try_into().expect("4 bytes"));
        let v2 = h[..4] == MAGIC;
        if !(v2 || h[..4] == MAGIC_V1) || seq != expect || t != tag {
            break;
        }
        let Some(payload) = data.get(at + HEADER..at + HEADER + len) else {
            break;
        };
        if checksum(seq, tag, payload) != crc {
            break;
        }
        let entries = decode(payload, v2).map_err(|why| JournalError::Malformed {
            path: path.display().to_string(),
            seq,
            why,
        })?;
        out.push(Record { seq, entries });
        at += HEADER + len;
        expect += 1;
    }
    Ok(out)
}

/// Reads a payload: entries as [`Journal::append`] wrote them (`v2`), or as the first format
/// did.
fn decode(p: &[u8], v2: bool) -> Result<Vec<Entry<Vec<u8>>>, String> {
    struct Cursor<'a>(&'a [u8]);
    impl<'a> Cursor<'a> {
        fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
            if self.0.len() < n {
                return Err(format!("{n} bytes wanted, {} left", self.0.len()));
            }
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            Ok(a)
        }
        fn u32(&mut self) -> Result<u32, String> {
            Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
        }
        fn u64(&mut self) -> Result<u64, String> {
            Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
        }
    }
    let mut c = Cursor(p);
    let n = c.u32()?;
    let mut entries = Vec::new();
    for _ in 0..n {
        let name_len = c.u32()? as usize;
        let name = std::str::from_utf8(c.take(name_len)?)
            .map_err(|e| format!("model name: {e}"))?
            .to_string();
        let generation = c.u64()?;
        let accepted = c.u64()?;
        let rejected = c.u64()?;
        let nw = c.u32()?;
        let mut writes = Vec::new();
        let mut versions = Vec::new();
        for _ in 0..nw {
            let j = c.u32()?;
            if v2 {
                versions.push(c.u64()?);
            }
            let len = c.u32()? as usize;
            writes.push((j, c.take(len)?.to_vec()));
        }
        let mut used = Vec::new();
        if v2 {
            for _ in 0..c.u32()? {
                let ticket = Ticket(u128::from_le_bytes(c.take(16)?.try_into().expect("16")));
                let instance = c.u32()?;
                let version = c.u64()?;
                let expires_ms = c.u64()?;
                let len = c.u32()? as usize;
                let outcome = std::str::from_utf8(c.take(len)?)
                    .map_err(|e| format!("ticket outcome: {e}"))?
                    .to_string()
                    .into();
                used.push((
                    UsedTicket {
                        ticket,
                        instance,
                        version,
                        expires_ms,
                    },
                    outcome,
                ));
            }
        }
        entries.push(Entry {
            name,
            generation,
            accepted,
            rejected,
            writes,
            versions,
            used,
        });
    }
    if !c.0.is_empty() {
        return Err(format!("{} bytes after the last entry", c.0.len()));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: u64 = 0x9e37_79b9_7f4a_7c15;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn dir(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!(
            "privfed-journal-{tag}-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// A temporary directory with a new journal of `bytes` in it, and the journal's path.
    fn fresh(tag: &str, bytes: u64) -> (Dir, PathBuf) {
        let d = dir(tag);
        let p = d.0.join(JOURNAL_FILE);
        create(&p, bytes).unwrap();
        (d, p)
    }

    fn entry(name: &str, v: u8, n: usize) -> Entry<Vec<u8>> {
        Entry {
            name: name.into(),
            generation: 7,
            accepted: n as u64,
            rejected: 1,
            writes: (0..n).map(|j| (j as u32, vec![v; 8 + j])).collect(),
            versions: (0..n).map(|j| 1000 + j as u64).collect(),
            used: (0..n % 3)
                .map(|j| {
                    let u = UsedTicket {
                        ticket: Ticket(u128::MAX - j as u128),
                        instance: j as u32,
                        version: 1000 + j as u64,
                        expires_ms: 1 << 40,
                    };
                    (u, format!("o{j}").into())
                })
                .collect(),
        }
    }

    /// Records come back in order with their contents; the size formula matches what is written.
    #[test]
    fn records_read_back_in_order() {
        let (_d, p) = fresh("order", 1 << 16);
        let mut j = Journal::open(&p, 11, TAG).unwrap();
        let recs = [
            vec![entry("a", 1, 2)],
            vec![entry("a", 2, 1), entry("bé", 3, 3)],
            vec![entry("c", 4, 0)],
        ];
        let mut offset = 0;
        for r in &recs {
            j.append(r).unwrap();
            offset += record_len(r);
            assert_eq!(j.offset, offset);
        }
        assert_eq!(j.last_seq(), 13);
        let back = read_after(&p, 10, TAG).unwrap();
        assert_eq!(back.len(), 3);
        for (i, (b, r)) in back.iter().zip(&recs).enumerate() {
            assert_eq!(b.seq, 11 + i as u64);
            assert_eq!(&b.entries, r);
        }
        // Read after a later checkpoint: the record at offset 0 is not the one expected.
        assert!(read_after(&p, 12, TAG).unwrap().is_empty());
    }

    /// A torn or corrupted record ends the journal: it and everything after it are not returned.
    #[test]
    fn a_damaged_record_ends_the_journal() {
        let (_d, p) = fresh("torn", 1 << 16);
        let mut j = Journal::open(&p, 1, TAG).unwrap();
        for v in 0..3 {
            j.append(&[entry("m", v, 2)]).unwrap();
        }
        let first = record_len(&[entry("m", 0, 2)]);
        let clean = std::fs::read(&p).unwrap();
        // A flipped bit in the second record's payload, length, sequence number, tag or CRC.
        for at in [first + 40, first + 5, first + 9, first + 17, first + 25] {
            let mut data = clean.clone();
            data[at as usize] ^= 0x10;
            std::fs::write(&p, &data).unwrap();
            let back = read_after(&p, 0, TAG).unwrap();
            assert_eq!(back.len(), 1, "flip at {at}");
            assert_eq!(back[0].seq, 1);
        }
        // A torn write: the third record half on disk.
        let mut data = clean.clone();
        let third = 2 * first as usize;
        for b in &mut data[third + 20..third + first as usize] {
            *b = 0;
        }
        std::fs::write(&p, &data).unwrap();
        assert_eq!(read_after(&p, 0, TAG).unwrap().len(), 2);
    }

    /// After a checkpoint the journal is written from offset 0 again, over the earlier round:
    /// the new round's records are read back and the rest of the old round is not.
    #[test]
    fn a_new_round_overwrites_the_old_and_stops_at_its_remains() {
        let (_d, p) = fresh("round", 1 << 16);
        let mut j = Journal::open(&p, 1, TAG).unwrap();
        for v in 0..5 {
            j.append(&[entry("m", v, 3)]).unwrap();
        }
        // Checkpoint covering 1..=5; a smaller record goes first in the new round.
        j.restart();
        j.append(&[entry("m", 9, 1)]).unwrap();
        let back = read_after(&p, 5, TAG).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].seq, 6);
        assert_eq!(back[0].entries, vec![entry("m", 9, 1)]);
        // The journal reopened after that checkpoint continues the numbering.
        let mut j = Journal::open(&p, 7, TAG).unwrap();
        assert!(j.is_empty());
        j.append(&[entry("m", 10, 1)]).unwrap();
        let back = read_after(&p, 6, TAG).unwrap();
        assert_eq!(back.iter().map(|r| r.seq).collect::<Vec<_>>(), [7]);
    }

    /// A record of the first format (written before tickets outlived a restart: no versions,
    /// no used tickets) is still read back, followed by records of the current format.
    #[test]
    fn records_of_the_first_format_are_read() {
        let (_d, p) = fresh("v1", 1 << 16);
        let mut payload = Vec::new();
        payload.extend_from_slice(&1u32.to_le_bytes());
        payload.extend_from_slice(&1u32.to_le_bytes());
        payload.extend_from_slice(b"m");
        for x in [7u64, 1, 0] {
            payload.extend_from_slice(&x.to_le_bytes());
        }
        payload.extend_from_slice(&1u32.to_le_bytes());
        payload.extend_from_slice(&3u32.to_le_bytes());
        payload.extend_from_slice(&4u32.to_le_bytes());
        payload.extend_from_slice(&[9u8; 4]);
        let mut rec = Vec::new();
        rec.extend_from_slice(&MAGIC_V1);
        rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        rec.extend_from_slice(&1u64.to_le_bytes());
        rec.extend_from_slice(&TAG.to_le_bytes());
        rec.extend_from_slice(&checksum(1, TAG, &payload).to_le_bytes());
        rec.extend_from_slice(&0u32.to_le_bytes());
        rec.extend_from_slice(&payload);
        write_at(
            &std::fs::OpenOptions::new().write(true).open(&p).unwrap(),
            &rec,
            0,
        )
        .unwrap();
        let mut j = Journal::open(&p, 2, TAG).unwrap();
        j.offset = rec.len() as u64;
        j.append(&[entry("n", 2, 2)]).unwrap();
        let back = read_after(&p, 0, TAG).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(
            back[0].entries,
            vec![Entry {
                name: "m".into(),
                generation: 7,
                accepted: 1,
                rejected: 0,
                writes: vec![(3, vec![9u8; 4])],
                versions: Vec::new(),
                used: Vec::new(),
            }]
        );
        assert_eq!(back[1].entries, vec![entry("n", 2, 2)]);
    }

    /// A record that does not fit is refused, not written past the end.
    #[test]
    fn a_record_that_does_not_fit_is_refused() {
        let (_d, p) = fresh("full", MIN_JOURNAL_BYTES);
        let mut j = Journal::open(&p, 1, TAG).unwrap();
        let big = [Entry {
            name: "m".into(),
            generation: 1,
            accepted: 1,
            rejected: 0,
            writes: vec![(0u32, vec![1u8; 3000])],
            versions: vec![1],
            used: Vec::new(),
        }];
        assert!(j.fits(record_len(&big)));
        j.append(&big).unwrap();
        assert!(!j.fits(record_len(&big)));
        assert!(j.could_fit(record_len(&big)));
        assert!(j.append(&big).is_err());
        assert_eq!(std::fs::metadata(&p).unwrap().len(), MIN_JOURNAL_BYTES);
        assert_eq!(read_after(&p, 0, TAG).unwrap().len(), 1);
    }

    /// Update weights are written verbatim, so a client can shape an update whose bytes hold a
    /// well-formed record. After a checkpoint a shorter record can end exactly where that fake
    /// header lies. Recovery replays it only if it carries the store's tag, which no client
    /// sees: with the right tag (shown here to prove the alignment) it would be read, and with
    /// any other it is not.
    #[test]
    fn a_record_forged_inside_an_update_is_not_replayed() {
        let d = dir("forged");
        let p = d.0.join(JOURNAL_FILE);
        // The bytes of a fake record numbered 3, written with some tag into a scratch journal.
        let forged = |tag: u64| {
            let q = d.0.join(format!("scratch-{tag:x}"));
            create(&q, MIN_JOURNAL_BYTES).unwrap();
            let mut j = Journal::open(&q, 3, tag).unwrap();
            j.append(&[entry("m", 0xEE, 1)]).unwrap();
            let n = j.offset as usize;
            std::fs::read(&q).unwrap()[..n].to_vec()
        };
        let short = [entry("m", 1, 2)];
        let short_len = record_len(&short) as usize;
        for (tag, read) in [(TAG, 2), (TAG ^ 1, 1), (0, 1)] {
            create(&p, 1 << 16).unwrap();
            // Round 1: record 1, an update whose value holds the fake record at the offset
            // where round 2's first record will end.
            let fake = forged(tag);
            let mut j = Journal::open(&p, 1, TAG).unwrap();
            let prefix = HEADER + 4 + (4 + 1 + 24 + 4) + 16;
            let mut value = vec![0u8; short_len - prefix];
            value.extend_from_slice(&fake);
            j.append(&[Entry {
                name: "m".into(),
                generation: 7,
                accepted: 1,
                rejected: 0,
                writes: vec![(0u32, value)],
                versions: vec![1],
                used: Vec::new(),
            }])
            .unwrap();
            // A checkpoint covers record 1; round 2 starts with a short record 2.
            j.restart();
            j.append(&short).unwrap();
            let back = read_after(&p, 1, TAG).unwrap();
            assert_eq!(
                back.iter().map(|r| r.seq).collect::<Vec<_>>(),
                (2..2 + read).collect::<Vec<u64>>(),
                "forged with tag {tag:x}"
            );
        }
    }
}
