//! The compact bytes of a short sliding log or a few leases, as the value
//! keeps them while they take fewer than `MAX` bytes (`layout`): the
//! state's RDB fields as varints, then its runs or leases as RDB holds
//! them. Written on the stack and read without a check (the value wrote
//! them, from a state a command could have stored): a short state's call
//! allocates only the log's or the leases' own buffer.

use crate::algorithms::concurrency::{Lease, Leases};
use crate::algorithms::sliding_log::Log;
use crate::algorithms::varint::get_varint;

/// The most bytes of a compact state's allocation: beyond them, a log or
/// leases are kept as an `Other`, changed in place, as a long state needs.
pub const MAX: usize = 64;

/// A compact state's bytes, made on the stack: at most MAX - 1 of them
/// (the allocation's first byte is their length).
pub struct Bytes {
    buffer: [u8; MAX],
    len: usize,
}

impl Bytes {
    fn new() -> Bytes {
        Bytes { buffer: [0; MAX], len: 0 }
    }

    /// Appends `bytes`, when they fit.
    fn push(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.len + bytes.len();
        self.buffer.get_mut(self.len..end)?.copy_from_slice(bytes);
        self.len = end;
        Some(())
    }

    /// Appends a varint, as `put_varint` writes it, when it fits.
    fn varint(&mut self, mut value: u64) -> Option<()> {
        while value >= 0x80 {
            self.push(&[(value as u8) | 0x80])?;
            value >>= 7;
        }
        self.push(&[value as u8])
    }

    /// The bytes, when they leave room for the length byte.
    fn done(self) -> Option<Bytes> {
        (self.len < MAX).then_some(self)
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buffer[..self.len]
    }
}

/// A short log's compact bytes: its RDB fields (first time, span to the
/// last, units) as varints, then its runs as RDB holds them.
pub fn log_bytes(log: &Log) -> Option<Bytes> {
    // A log this long cannot fit: known at once.
    if log.runs.len() > 2 * MAX {
        return None;
    }
    let mut bytes = Bytes::new();
    for field in [log.first_us, log.last_us - log.first_us, log.total] {
        bytes.varint(field)?;
    }
    if log.total > 0 {
        // The first run's delta, canonical: 0.
        bytes.push(&[0])?;
        bytes.push(log.after_first_delta())?;
    }
    bytes.done()
}

/// A few leases' compact bytes: their RDB fields (last update, next id,
/// count) as varints, then the leases as RDB holds them (`Leases::encode`:
/// each one's id step, end after the last update, and slots).
pub fn leases_bytes(leases: &Leases) -> Option<Bytes> {
    // Each lease takes at least 3 bytes: too many cannot fit.
    if 3 * leases.held.len() >= MAX {
        return None;
    }
    let mut bytes = Bytes::new();
    for field in [leases.last_us, leases.next_id, leases.held.len() as u64] {
        bytes.varint(field)?;
    }
    let mut previous_id = 0;
    for lease in &leases.held {
        bytes.varint(lease.id - previous_id)?;
        bytes.varint(lease.expires_us - leases.last_us)?;
        bytes.varint(lease.n)?;
        previous_id = lease.id;
    }
    bytes.done()
}

/// The `N` varints in `bytes` from `at`, moving past them.
fn varints<const N: usize>(bytes: &[u8], at: &mut usize) -> Option<[u64; N]> {
    let mut values = [0; N];
    for value in &mut values {
        let (read, len) = get_varint(bytes.get(*at..)?)?;
        (*value, *at) = (read, *at + len);
    }
    Some(values)
}

/// The log `log_bytes` wrote. (The empty log stands for bytes it did not
/// write, which cannot happen.)
pub fn log_of(bytes: &[u8]) -> Log {
    let mut at = 0;
    match varints(bytes, &mut at) {
        Some([first_us, span_us, total]) => {
            Log::from_checked(first_us, first_us.saturating_add(span_us), total, &bytes[at..])
        }
        None => Log::default(),
    }
}

/// The leases `leases_bytes` wrote. (Fresh leases stand for bytes it did
/// not write, which cannot happen.)
pub fn leases_of(bytes: &[u8]) -> Leases {
    let mut at = 0;
    let mut read = || -> Option<Leases> {
        let [last_us, next_id, count] = varints(bytes, &mut at)?;
        // Room for one more, as an acquire adds it.
        let mut held = Vec::with_capacity(usize::try_from(count).ok()? + 1);
        let mut id = 0u64;
        for _ in 0..count {
            let [step, after, n] = varints(bytes, &mut at)?;
            id = id.saturating_add(step);
            held.push(Lease { id, expires_us: last_us.saturating_add(after), n });
        }
        Some(Leases { last_us, next_id, held })
    };
    read().unwrap_or_default()
}

/// The 8-byte words of a compact state's allocation holding `len` bytes
/// after the length byte: 16, 32, 48 or 64 bytes.
pub fn words(len: usize) -> usize {
    (len + 1).div_ceil(16) * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compact bytes are the RDB's: the same varints, read back alike.
    #[test]
    fn compact_bytes_read_back_and_match_rdb() {
        let log = Log::from_runs([(1_780_000_000_000_000, 2), (1_780_000_000_001_000, 1)]).unwrap();
        let bytes = log_bytes(&log).unwrap();
        assert_eq!(log_of(&bytes), log);
        assert!(bytes.ends_with(&log.canonical_runs()));
        let empty = log_bytes(&Log::default()).unwrap();
        assert_eq!((&empty[..], log_of(&empty)), (&[0, 0, 0][..], Log::default()));
        let leases = Leases {
            last_us: 1_780_000_000_000_000,
            next_id: 4,
            held: vec![Lease { id: 3, expires_us: 1_780_000_030_000_000, n: 2 }],
        };
        let bytes = leases_bytes(&leases).unwrap();
        assert_eq!(leases_of(&bytes), leases);
        assert!(bytes.ends_with(&leases.encode()));
        let many = Log::from_runs((0..40).map(|i| (1_780_000_000_000_000 + i * 1000, 1))).unwrap();
        assert!(log_bytes(&many).is_none());
    }
}
