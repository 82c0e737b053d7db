//! How a value sits in memory. Redis keeps one word per value, beside its
//! own object (16 bytes) and module value (16 bytes); ours names its layout
//! in its three low bits (free, since every allocation is 8-aligned), so
//! that the common states cost one allocation of 16 bytes or less, with no
//! tag word, and no more than the decimal string script mode keeps:
//!
//! - RL.THROTTLE's state is the word itself (no allocation);
//! - a bucket whose pico-units fit 64 bits, a fixed window, and a sliding
//!   window whose counts fit 32 bits each: 16 bytes;
//! - a short sliding log and a few leases: their varints, compact, in one
//!   allocation of at most `compact::MAX` bytes (read into a `Log` or
//!   `Leases` on each call, written back after a change);
//! - everything else (wide buckets and counts, a kind without a layout of
//!   its own as its RDB record, long logs, many leases): an `Other`, whose
//!   tag word costs little beside such a state.
//!
//! `Stored` owns a value; `StoredRef` and `StoredMut` borrow one that Redis
//! holds, for as long as their lifetime says, shared or exclusive. All the
//! unsafe code of the data type's memory is in this file.

use std::borrow::Cow;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};

use crate::algorithms::concurrency::Leases;
use crate::algorithms::sliding_log::Log;
use crate::algorithms::{fixed_window, gcra, leaky_bucket, sliding_window, token_bucket};
use crate::stats;

use super::compact;
use super::rdb::FixedRecord;
use super::value::{Fixed, Items, Owned, Value};

/// The layouts a value's word names in its low bits.
mod tag {
    pub const BITS: usize = 0b111;
    /// RL.THROTTLE's arrival time, in the word's other bits.
    pub const THROTTLE: usize = 0;
    pub const TOKEN_BUCKET: usize = 1;
    pub const LEAKY_BUCKET: usize = 2;
    pub const FIXED_WINDOW: usize = 3;
    pub const SLIDING_WINDOW: usize = 4;
    /// A short sliding log, compact.
    pub const SLIDING_LOG: usize = 5;
    /// A few leases, compact.
    pub const CONCURRENCY: usize = 6;
    /// An `Other`.
    pub const OTHER: usize = 7;
}

/// A bucket whose pico-units fit 64 bits (up to 18,446,744 units): 16 bytes.
#[derive(Clone, Copy)]
struct Narrow {
    amount: u64,
    last_us: u64,
}

impl Narrow {
    /// Whether a bucket's amount fits.
    fn fits(amount: u128) -> bool {
        amount <= u128::from(u64::MAX)
    }

    /// A bucket's amount and time, when the amount `fits`.
    fn of(amount: u128, last_us: u64) -> Narrow {
        Narrow { amount: amount as u64, last_us }
    }

    fn amount(&self) -> (u128, u64) {
        (self.amount.into(), self.last_us)
    }
}

/// A sliding window whose counts fit 32 bits each: 16 bytes.
#[derive(Clone, Copy)]
struct NarrowWindow {
    last_us: u64,
    /// The previous window's count in the high half, the current's in the
    /// low one.
    counts: u64,
}

impl NarrowWindow {
    /// Whether a window's counts fit.
    fn fits(s: &sliding_window::State) -> bool {
        s.previous <= u32::MAX.into() && s.current <= u32::MAX.into()
    }

    /// A window, when its counts `fit`.
    fn of(s: sliding_window::State) -> NarrowWindow {
        NarrowWindow { last_us: s.last_us, counts: s.previous << 32 | s.current }
    }

    fn state(&self) -> sliding_window::State {
        let (previous, current) = (self.counts >> 32, self.counts & u64::from(u32::MAX));
        sliding_window::State { last_us: self.last_us, previous, current }
    }
}

/// The latest arrival time kept in the word: 2^61 ns, in 2043.
const INLINE_THROTTLE_NS: u64 = 1 << 61;

/// Every state without a layout of its own: 32 bytes, a log or leases
/// boxed (their buffers dwarf the box).
enum Other {
    /// A fixed state (a wide bucket or window, an arrival time after 2043,
    /// a kind with no tag), as its RDB record: its fields here, beside the
    /// enum's tag, keep the whole in 32 bytes.
    Fixed {
        kind: u8,
        fields: [u64; 3],
    },
    Log(Box<Log>),
    Leases(Box<Leases>),
}

impl Other {
    fn view(&self) -> Value<'_> {
        match self {
            &Other::Fixed { kind, fields } => {
                let record = FixedRecord { kind, fields };
                Value::Fixed(record.state().expect("the record of a state a call stored"))
            }
            Other::Log(log) => Value::Log(Cow::Borrowed(&**log)),
            Other::Leases(leases) => Value::Leases(Cow::Borrowed(&**leases)),
        }
    }

    /// Bytes it holds beyond its own size.
    fn heap_bytes(&self) -> usize {
        match self {
            Other::Fixed { .. } => 0,
            Other::Log(log) => size_of::<Log>() + log.heap_bytes(),
            Other::Leases(leases) => size_of::<Leases>() + leases.heap_bytes(),
        }
    }
}

/// A state of many items, kept compact while short.
trait Compact: Sized {
    /// The tag of its compact layout.
    const TAG: usize;
    /// Its compact bytes, when they are short enough.
    fn encode(&self) -> Option<compact::Bytes>;
    /// The state `encode` wrote.
    fn decode(bytes: &[u8]) -> Self;
    /// The state as an `Other`, when too long to be compact.
    fn boxed(self) -> Other;
    /// The state an `Other` holds, when it is one of this kind.
    fn of(other: &mut Other) -> Option<&mut Self>;
}

impl Compact for Log {
    const TAG: usize = tag::SLIDING_LOG;

    fn encode(&self) -> Option<compact::Bytes> {
        compact::log_bytes(self)
    }

    fn decode(bytes: &[u8]) -> Log {
        compact::log_of(bytes)
    }

    fn boxed(self) -> Other {
        Other::Log(Box::new(self))
    }

    fn of(other: &mut Other) -> Option<&mut Log> {
        if let Other::Log(log) = other { Some(log) } else { None }
    }
}

impl Compact for Leases {
    const TAG: usize = tag::CONCURRENCY;

    fn encode(&self) -> Option<compact::Bytes> {
        compact::leases_bytes(self)
    }

    fn decode(bytes: &[u8]) -> Leases {
        compact::leases_of(bytes)
    }

    fn boxed(self) -> Other {
        Other::Leases(Box::new(self))
    }

    fn of(other: &mut Other) -> Option<&mut Leases> {
        if let Other::Leases(leases) = other { Some(leases) } else { None }
    }
}

/// A value of the data type, owned: one word, naming its layout in its
/// low bits. Dropping it frees the state; `into_raw` hands it to Redis,
/// which gives it back to the `free` callback.
pub struct Stored {
    word: *mut c_void,
}

/// A value Redis holds, borrowed shared for `'a`: the state cannot change
/// or go while it lives.
#[derive(Clone, Copy)]
pub struct StoredRef<'a> {
    word: *const c_void,
    state: PhantomData<&'a Stored>,
}

/// A value Redis holds, borrowed exclusively for `'a`: the word itself,
/// which a change may replace (a new layout), for the caller to give back
/// to Redis.
pub struct StoredMut<'a> {
    word: &'a mut *mut c_void,
}

fn tag_of(word: *const c_void) -> usize {
    word.addr() & tag::BITS
}

/// The address the word points to, without its tag.
fn address(word: *const c_void) -> *mut c_void {
    word.map_addr(|address| address & !tag::BITS).cast_mut()
}

/// A new allocation holding `state`, tagged.
fn tagged<T>(tag: usize, state: T) -> *mut c_void {
    const { assert!(align_of::<T>() >= 8) };
    Box::into_raw(Box::new(state)).map_addr(|address| address | tag).cast()
}

/// A new compact allocation holding `bytes` (fewer than `compact::MAX`),
/// tagged: the length, then the bytes.
fn new_compact(tag: usize, bytes: &[u8]) -> *mut c_void {
    let mut words = vec![0u64; compact::words(bytes.len())].into_boxed_slice();
    let start: *mut u8 = words.as_mut_ptr().cast();
    // SAFETY: the words hold at least `bytes.len() + 1` bytes, and any
    // bytes are valid `u64` bits.
    unsafe {
        start.write(bytes.len() as u8);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), start.add(1), bytes.len());
    }
    Box::into_raw(words).cast::<u64>().map_addr(|address| address | tag).cast()
}

/// The word of a new state holding `owned`, in its layout.
fn word_of(owned: Owned) -> *mut c_void {
    match owned {
        Owned::Fixed(fixed) => fixed_word(fixed),
        Owned::Log(log) => compact_word(log),
        Owned::Leases(leases) => compact_word(leases),
    }
}

/// The word of a new state of many items: compact while short.
fn compact_word<T: Compact>(state: T) -> *mut c_void {
    match state.encode() {
        Some(bytes) => new_compact(T::TAG, &bytes),
        None => tagged(tag::OTHER, state.boxed()),
    }
}

/// The word of a new fixed state: in its own layout when it has one that
/// holds it, else as its RDB record.
fn fixed_word(fixed: Fixed) -> *mut c_void {
    match fixed {
        Fixed::TokenBucket(s) if Narrow::fits(s.tokens) => {
            tagged(tag::TOKEN_BUCKET, Narrow::of(s.tokens, s.last_us))
        }
        Fixed::LeakyBucket(s) if Narrow::fits(s.level) => {
            tagged(tag::LEAKY_BUCKET, Narrow::of(s.level, s.last_us))
        }
        Fixed::FixedWindow(s) => tagged(tag::FIXED_WINDOW, s),
        Fixed::SlidingWindow(s) if NarrowWindow::fits(&s) => {
            tagged(tag::SLIDING_WINDOW, NarrowWindow::of(s))
        }
        // A state is at least MIN_EMISSION_NS: the word is never null.
        Fixed::Throttle(s) if s.tat_ns < INLINE_THROTTLE_NS => {
            std::ptr::without_provenance_mut((s.tat_ns as usize) << 3 | tag::THROTTLE)
        }
        _ => {
            let FixedRecord { kind, fields } = FixedRecord::of(&fixed);
            tagged(tag::OTHER, Other::Fixed { kind, fields })
        }
    }
}

/// Frees the state a word names.
///
/// # Safety
/// The word came from `word_of` (or `Stored::into_raw`), and nothing uses
/// it after this.
unsafe fn free_word(word: *mut c_void) {
    let address = address(word);
    // SAFETY: each arm frees the allocation its tag names, as it was made.
    unsafe {
        match tag_of(word) {
            tag::THROTTLE => {}
            tag::TOKEN_BUCKET | tag::LEAKY_BUCKET => drop(Box::from_raw(address.cast::<Narrow>())),
            tag::FIXED_WINDOW => drop(Box::from_raw(address.cast::<fixed_window::State>())),
            tag::SLIDING_WINDOW => drop(Box::from_raw(address.cast::<NarrowWindow>())),
            tag::SLIDING_LOG | tag::CONCURRENCY => {
                let words = compact::words(usize::from(*address.cast::<u8>()));
                let slice = std::ptr::slice_from_raw_parts_mut(address.cast::<u64>(), words);
                drop(Box::from_raw(slice));
            }
            _ => drop(Box::from_raw(address.cast::<Other>())),
        }
    }
}

impl Stored {
    /// A new value holding `owned`.
    pub fn new(owned: Owned) -> Stored {
        stats::value_created();
        Stored { word: word_of(owned) }
    }

    /// The word for Redis to hold; `from_raw` takes it back.
    pub fn into_raw(self) -> *mut c_void {
        std::mem::ManuallyDrop::new(self).word
    }

    /// Takes back a value that `into_raw` gave Redis.
    ///
    /// # Safety
    /// `word` came from `into_raw`, and nothing else owns it any more: Redis
    /// gave it to the `free` callback, or never got it.
    pub unsafe fn from_raw(word: *mut c_void) -> Stored {
        Stored { word }
    }

    /// The state, borrowed as long as the value.
    #[cfg(test)]
    pub fn view(&self) -> Value<'_> {
        // SAFETY: `self` owns the word, which lives and stays as it is
        // while `self` is borrowed.
        unsafe { StoredRef::new(self.word) }.view()
    }

    /// The value, to change.
    #[cfg(test)]
    pub fn as_mut(&mut self) -> StoredMut<'_> {
        // SAFETY: `self` owns the word, borrowed exclusively here.
        unsafe { StoredMut::new(&mut self.word) }
    }
}

impl Drop for Stored {
    fn drop(&mut self) {
        stats::value_freed();
        // SAFETY: `self` owns the word; nothing uses it after this.
        unsafe { free_word(self.word) };
    }
}

impl<'a> StoredRef<'a> {
    /// Borrows a value Redis holds.
    ///
    /// # Safety
    /// `word` came from `Stored::into_raw`, and Redis neither frees nor
    /// changes the value while `'a` lasts (a command's key stays open and
    /// unchanged; a callback's value is Redis's for the call).
    pub unsafe fn new(word: *const c_void) -> StoredRef<'a> {
        StoredRef { word, state: PhantomData }
    }

    /// The `T` the word points to.
    ///
    /// # Safety
    /// The word's tag names a layout of `T`.
    unsafe fn state<T>(self) -> &'a T {
        // SAFETY: the word points to a live `T` (the caller matched the
        // tag), shared for `'a` (`new`'s contract).
        unsafe { &*address(self.word).cast::<T>() }
    }

    /// A compact state's bytes.
    ///
    /// # Safety
    /// The word's tag names a compact layout.
    unsafe fn compact_bytes(self) -> &'a [u8] {
        let start = address(self.word).cast::<u8>().cast_const();
        // SAFETY: a compact allocation: its length, then that many bytes,
        // shared for `'a` (`new`'s contract).
        unsafe { std::slice::from_raw_parts(start.add(1), usize::from(*start)) }
    }

    /// The state.
    pub fn view(self) -> Value<'a> {
        // SAFETY: each arm reads the layout its tag names.
        unsafe {
            match tag_of(self.word) {
                tag::THROTTLE => {
                    let tat_ns = (self.word.addr() >> 3) as u64;
                    Value::Fixed(Fixed::Throttle(gcra::State { tat_ns }))
                }
                tag::TOKEN_BUCKET => {
                    let (tokens, last_us) = self.state::<Narrow>().amount();
                    Value::Fixed(Fixed::TokenBucket(token_bucket::State { tokens, last_us }))
                }
                tag::LEAKY_BUCKET => {
                    let (level, last_us) = self.state::<Narrow>().amount();
                    Value::Fixed(Fixed::LeakyBucket(leaky_bucket::State { level, last_us }))
                }
                tag::FIXED_WINDOW => Value::Fixed(Fixed::FixedWindow(*self.state())),
                tag::SLIDING_WINDOW => {
                    Value::Fixed(Fixed::SlidingWindow(self.state::<NarrowWindow>().state()))
                }
                tag::SLIDING_LOG => Value::Log(Cow::Owned(compact::log_of(self.compact_bytes()))),
                tag::CONCURRENCY => {
                    Value::Leases(Cow::Owned(compact::leases_of(self.compact_bytes())))
                }
                _ => self.state::<Other>().view(),
            }
        }
    }

    /// Whether the value holds a sliding log, told by its layout alone.
    pub fn holds_log(self) -> bool {
        // SAFETY: the tag names an `Other` when it is OTHER.
        tag_of(self.word) == tag::SLIDING_LOG
            || tag_of(self.word) == tag::OTHER && matches!(unsafe { self.state() }, Other::Log(_))
    }

    /// Whether the value holds leases, told by its layout alone.
    pub fn holds_leases(self) -> bool {
        // SAFETY: the tag names an `Other` when it is OTHER.
        tag_of(self.word) == tag::CONCURRENCY
            || tag_of(self.word) == tag::OTHER
                && matches!(unsafe { self.state() }, Other::Leases(_))
    }

    /// The bytes the value holds, for MEMORY USAGE.
    pub fn memory(self) -> usize {
        // SAFETY: each arm reads the layout its tag names.
        unsafe {
            match tag_of(self.word) {
                tag::THROTTLE => 0,
                tag::TOKEN_BUCKET | tag::LEAKY_BUCKET => size_of::<Narrow>(),
                tag::FIXED_WINDOW => size_of::<fixed_window::State>(),
                tag::SLIDING_WINDOW => size_of::<NarrowWindow>(),
                tag::SLIDING_LOG | tag::CONCURRENCY => {
                    8 * compact::words(self.compact_bytes().len())
                }
                _ => size_of::<Other>() + self.state::<Other>().heap_bytes(),
            }
        }
    }
}

impl<'a> StoredMut<'a> {
    /// Borrows a value Redis holds, to change: the word may be replaced, and
    /// the caller gives Redis the new one.
    ///
    /// # Safety
    /// `*word` came from `Stored::into_raw`, and nothing else reads, changes
    /// or frees the value while `'a` lasts.
    pub unsafe fn new(word: &'a mut *mut c_void) -> StoredMut<'a> {
        StoredMut { word }
    }

    /// The value, borrowed shared from this borrow.
    fn shared(&self) -> StoredRef<'_> {
        // SAFETY: the value is live, and borrowed from `self` (`new`'s
        // contract).
        unsafe { StoredRef::new(*self.word) }
    }

    /// The `T` the word points to, to change.
    ///
    /// # Safety
    /// The word's tag names a layout of `T`.
    unsafe fn state_mut<T>(&mut self) -> &mut T {
        // SAFETY: the word points to a live `T` (the caller matched the
        // tag), borrowed exclusively through `self` (`new`'s contract).
        unsafe { &mut *address(*self.word).cast::<T>() }
    }

    /// Makes `new` the value's word, freeing the old state.
    fn relayout(&mut self, new: *mut c_void) {
        let old = std::mem::replace(self.word, new);
        // SAFETY: the old word was this borrow's to change (`new`'s
        // contract), and is no longer the value's.
        unsafe { free_word(old) };
    }

    /// Writes `fixed`: over the state when it has the layout `fixed` needs,
    /// else in a new one, freeing the old.
    pub fn put(&mut self, fixed: Fixed) {
        // SAFETY: each arm writes the layout its tag names.
        unsafe {
            match (tag_of(*self.word), fixed) {
                (tag::TOKEN_BUCKET, Fixed::TokenBucket(s)) if Narrow::fits(s.tokens) => {
                    *self.state_mut() = Narrow::of(s.tokens, s.last_us)
                }
                (tag::LEAKY_BUCKET, Fixed::LeakyBucket(s)) if Narrow::fits(s.level) => {
                    *self.state_mut() = Narrow::of(s.level, s.last_us)
                }
                (tag::FIXED_WINDOW, Fixed::FixedWindow(s)) => *self.state_mut() = s,
                (tag::SLIDING_WINDOW, Fixed::SlidingWindow(s)) if NarrowWindow::fits(&s) => {
                    *self.state_mut() = NarrowWindow::of(s)
                }
                // RL.THROTTLE's state is the word, and an `Other` (rare)
                // takes a new one: no allocation for the former, one of 32
                // bytes for the latter.
                _ => self.relayout(fixed_word(fixed)),
            }
        }
    }

    /// Runs `change` on the log the value holds; `None`, changing
    /// nothing, when it holds another kind.
    pub fn change_log<R>(&mut self, change: impl FnOnce(&mut Log) -> R) -> Option<R> {
        self.change(change)
    }

    /// Runs `change` on the leases the value holds; `None`, changing
    /// nothing, when it holds another kind.
    pub fn change_leases<R>(&mut self, change: impl FnOnce(&mut Leases) -> R) -> Option<R> {
        self.change(change)
    }

    /// Runs `change` on the `T` the value holds; `None`, changing nothing,
    /// when it holds another kind. A short state is read from its compact
    /// bytes and written back; one that grows past them (or shrinks back)
    /// changes layout.
    fn change<T: Compact, R>(&mut self, change: impl FnOnce(&mut T) -> R) -> Option<R> {
        let tag = tag_of(*self.word);
        if tag == T::TAG {
            // SAFETY: the tag names a compact layout.
            let mut state = T::decode(unsafe { self.shared().compact_bytes() });
            let result = change(&mut state);
            match state.encode() {
                Some(bytes) => self.write_compact(T::TAG, &bytes),
                None => self.relayout(tagged(tag::OTHER, state.boxed())),
            }
            return Some(result);
        }
        if tag != tag::OTHER {
            return None;
        }
        // SAFETY: the tag names an `Other`.
        let state = T::of(unsafe { self.state_mut::<Other>() })?;
        let result = change(state);
        if let Some(bytes) = state.encode() {
            self.relayout(new_compact(T::TAG, &bytes));
        }
        Some(result)
    }

    /// Writes a compact state of the layout `tag` already holds: over it
    /// when it takes as many words, else in a new allocation.
    fn write_compact(&mut self, tag: usize, bytes: &[u8]) {
        // SAFETY: the caller's tag names a compact layout.
        let held = unsafe { self.shared().compact_bytes() }.len();
        if compact::words(held) != compact::words(bytes.len()) {
            return self.relayout(new_compact(tag, bytes));
        }
        let start = address(*self.word).cast::<u8>();
        // SAFETY: the allocation holds `compact::words(held)` words, as many
        // as the new bytes and their length need; borrowed exclusively.
        unsafe {
            start.write(bytes.len() as u8);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), start.add(1), bytes.len());
        }
    }

    /// RL.SETSTATE's `KIND APPEND field...`: adds a log's runs or leases
    /// after those the value holds, when it holds that kind and the state
    /// stays one a command could have stored; else changes nothing and says
    /// so. O(runs given) for a long log, O(leases held) for leases.
    pub fn append(&mut self, items: Items) -> bool {
        let appended = match &items {
            Items::Runs(runs) => self.change_log(|log| log.extend(runs)),
            Items::Leases(held) => self.change_leases(|leases| leases.extend(held)),
        };
        appended.unwrap_or(false)
    }

    /// Active defrag: lets `moved` move the value's allocations (the state,
    /// and a long log's runs or many leases), as Redis moves its own
    /// types'. `moved` gives an allocation's new place when it moved it
    /// (and freed the old one).
    pub fn defrag(&mut self, moved: impl Fn(*mut c_void) -> Option<*mut c_void>) {
        let tag = tag_of(*self.word);
        if tag == tag::THROTTLE {
            return;
        }
        if let Some(new) = moved(address(*self.word)) {
            *self.word = new.map_addr(|address| address | tag);
        }
        if tag == tag::OTHER {
            // SAFETY: the tag names an `Other`.
            match unsafe { self.state_mut::<Other>() } {
                Other::Log(log) => {
                    move_box(log, &moved);
                    move_buffer(&mut log.runs, moved);
                }
                Other::Leases(leases) => {
                    move_box(leases, &moved);
                    move_buffer(&mut leases.held, moved);
                }
                _ => {}
            }
        }
    }
}

/// Lets `moved` move a box's allocation.
fn move_box<T>(boxed: &mut Box<T>, moved: impl Fn(*mut c_void) -> Option<*mut c_void>) {
    let at: *mut T = &mut **boxed;
    if let Some(new) = moved(at.cast()) {
        // SAFETY: the allocator copied the box's `T` to `new` and freed the
        // old one: the box is written over, not dropped.
        unsafe { std::ptr::write(boxed, Box::from_raw(new.cast())) };
    }
}

/// Lets `moved` move a vector's heap buffer, if it has one.
fn move_buffer<T>(vec: &mut Vec<T>, moved: impl Fn(*mut c_void) -> Option<*mut c_void>) {
    if vec.capacity() == 0 {
        return;
    }
    if let Some(new) = moved(vec.as_mut_ptr().cast()) {
        let (len, capacity) = (vec.len(), vec.capacity());
        // SAFETY: the allocator copied the buffer, at least as large, and
        // freed the old one, which must not be dropped.
        unsafe { std::ptr::write(vec, Vec::from_raw_parts(new.cast(), len, capacity)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::concurrency::Lease;

    const T0: u64 = 1_780_000_000_000_000;

    fn log(runs: u64) -> Log {
        Log::from_runs((0..runs).map(|i| (T0 + i * 1000, 1))).unwrap()
    }

    fn leases(count: u64) -> Leases {
        let held = (1..=count).map(|id| Lease { id, expires_us: T0 + 1_000_000_000, n: 1 });
        Leases { last_us: T0, next_id: count + 1, held: held.collect() }
    }

    fn window(previous: u64, current: u64) -> Owned {
        Owned::Fixed(Fixed::SlidingWindow(sliding_window::State { last_us: T0, previous, current }))
    }

    fn throttle(tat_ns: u64) -> Owned {
        Owned::Fixed(Fixed::Throttle(gcra::State { tat_ns }))
    }

    /// Every kind, in every layout, reads back what was stored, and
    /// rewritten reads back again.
    #[test]
    fn every_layout_holds_its_state() {
        let wide = 18_446_745 * crate::algorithms::PICO_PER_UNIT;
        let states = [
            Owned::Fixed(Fixed::TokenBucket(token_bucket::State { tokens: 5, last_us: 7 })),
            Owned::Fixed(Fixed::TokenBucket(token_bucket::State { tokens: wide, last_us: 7 })),
            Owned::Fixed(Fixed::LeakyBucket(leaky_bucket::State { level: 5, last_us: 7 })),
            Owned::Fixed(Fixed::LeakyBucket(leaky_bucket::State { level: wide, last_us: 7 })),
            Owned::Fixed(Fixed::FixedWindow(fixed_window::State { last_us: 7, count: 3 })),
            window(1, 2),
            window(u64::from(u32::MAX), u64::from(u32::MAX)),
            window(1 << 32, 0),
            window(0, crate::algorithms::MAX_UNITS),
            throttle(1000),
            throttle(INLINE_THROTTLE_NS - 1),
            throttle(INLINE_THROTTLE_NS),
            throttle(u64::MAX),
            Owned::Log(Log::default()),
            Owned::Log(log(1)),
            Owned::Log(log(5)),
            Owned::Log(log(1000)),
            Owned::Leases(leases(1)),
            Owned::Leases(leases(2)),
            Owned::Leases(leases(100)),
        ];
        for owned in states {
            let mut stored = Stored::new(owned.clone());
            assert_eq!(stored.view().into_owned(), owned);
            match &owned {
                Owned::Fixed(fixed) => stored.as_mut().put(*fixed),
                Owned::Log(log) => assert_eq!(stored.as_mut().change_log(|l| l == log), Some(true)),
                Owned::Leases(held) => {
                    assert_eq!(stored.as_mut().change_leases(|l| l == held), Some(true))
                }
            }
            assert_eq!(stored.view().into_owned(), owned);
            let word = stored.into_raw();
            // SAFETY: the word came from `into_raw` just above.
            let back = unsafe { Stored::from_raw(word) };
            assert_eq!(back.view().into_owned(), owned);
        }
    }

    /// Bytes of the value's own allocation, as MEMORY USAGE says.
    fn memory(owned: Owned) -> usize {
        let stored = Stored::new(owned);
        // SAFETY: `stored` owns the word and outlives the borrow.
        unsafe { StoredRef::new(stored.word) }.memory()
    }

    /// The common states take one allocation of 16 or 32 bytes, or none:
    /// no more than script mode's decimal string (docs/architecture.md).
    #[test]
    fn common_states_take_one_small_allocation() {
        let bucket =
            token_bucket::State { tokens: 999_999 * crate::algorithms::PICO_PER_UNIT, last_us: T0 };
        assert_eq!(memory(Owned::Fixed(Fixed::TokenBucket(bucket))), 16);
        assert_eq!(
            memory(Owned::Fixed(Fixed::FixedWindow(fixed_window::State { last_us: T0, count: 1 }))),
            16
        );
        assert_eq!(memory(window(0, 1)), 16);
        assert_eq!(memory(throttle(1_780_000_000_000_000_000)), 0);
        assert_eq!(memory(Owned::Log(log(1))), 16);
        assert_eq!(memory(Owned::Log(log(5))), 32);
        assert_eq!(memory(Owned::Leases(leases(1))), 32);
        assert_eq!(memory(Owned::Leases(leases(2))), 32);
        assert!(memory(Owned::Log(log(1000))) > 2000);
    }

    /// A log grows out of its compact bytes and, trimmed, back into them.
    #[test]
    fn a_log_changes_layout_as_it_grows_and_shrinks() {
        let mut stored = Stored::new(Owned::Log(log(1)));
        let tag = |stored: &Stored| tag_of(stored.word);
        assert_eq!(tag(&stored), tag::SLIDING_LOG);
        for i in 1..100 {
            let append = crate::algorithms::sliding_log::Append {
                cutoff_us: 0,
                at_us: T0 + i * 1000,
                count: 1,
            };
            stored.as_mut().change_log(|log| log.apply(append));
        }
        assert_eq!(tag(&stored), tag::OTHER);
        assert_eq!(stored.view().into_owned(), Owned::Log(log(100)));
        let last = T0 + 99 * 1000;
        let trim =
            crate::algorithms::sliding_log::Append { cutoff_us: last, at_us: last, count: 1 };
        stored.as_mut().change_log(|log| log.apply(trim));
        assert_eq!(tag(&stored), tag::SLIDING_LOG);
        let expected = Log::from_runs([(last, 1), (last, 1)]).unwrap();
        assert_eq!(stored.view().into_owned(), Owned::Log(expected));
    }

    #[test]
    fn buckets_keep_16_bytes_up_to_18446744_units_and_32_after() {
        assert_eq!(size_of::<Narrow>(), 16);
        assert_eq!(size_of::<NarrowWindow>(), 16);
        assert_eq!(size_of::<Other>(), 32);
    }
}
