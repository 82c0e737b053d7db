//! RESTORE fuzz: DUMPs of real states of every kind, mutated (bit flips,
//! truncation, extension, wrong opcodes, huge lengths, field values, the
//! sliding log's runs) with the trailing RDB version and CRC-64 recomputed,
//! so that Redis hands every payload to the module's loader. Each RESTORE
//! must answer `ERR Bad data format` and create no key, or create a key
//! that every command, DUMP/RESTORE and DEBUG RELOAD then handle. The server
//! must never go down.
//!
//! A DUMP payload (cluster.c createDumpPayload) is the value's RDB type
//! byte (7, RDB_TYPE_MODULE_2), the module type id as an RDB length, the
//! module's opcodes (UINT, STRING, ..., EOF), then the RDB version (2 bytes,
//! little-endian) and the CRC-64 of everything before it (8 bytes,
//! little-endian). The test learns the rest from real DUMPs, not from the
//! module's source, so a new encoding version is fuzzed as it comes.

mod common;

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, ErrorKind, Value};

use common::Server;

/// Stands for the key under test in `CALLS`.
const KEY: &str = "{key}";
const MAX: &str = "18446744073709551615";

/// Every call run on each restored key, and again on every key that
/// survives DEBUG RELOAD. When the module gets a command, add its calls here.
/// RL.SETSTATE is not among them: it only overwrites, and freeing a
/// restored value is what FLUSHALL after each batch does.
const CALLS: &[&[&str]] = &[
    &["RL.TOKENBUCKET", KEY, "10", "1", "1700000000.5", "1"],
    &["RL.TOKENBUCKET", KEY, "18446744", "1000", "*", "3"],
    &["RL.TOKENBUCKET", KEY, "1", "0.000001", "18446744073709.551615", "0"],
    &["RL.TOKENBUCKET", KEY, "9007199254740991", "1000000", "1700000010.5", "9007199254740991"],
    &["RL.LEAKYBUCKET", KEY, "10", "1", "1700000000.5", "1"],
    &["RL.LEAKYBUCKET", KEY, "18446744", "1000", "*", "3"],
    &["RL.LEAKYBUCKET", KEY, "1", "0.000001", "18446744073709.551615", "0"],
    &["RL.LEAKYBUCKET", KEY, "9007199254740991", "1000000", "1700000010.5", "9007199254740991"],
    &["RL.FIXEDWINDOW", KEY, "10", "60", "1700000000.5", "1"],
    &["RL.FIXEDWINDOW", KEY, "9007199254740991", "3600", "*", "3"],
    &["RL.FIXEDWINDOW", KEY, "1", "0.001", "18446744073709.551615", "0"],
    &["RL.FIXEDWINDOW", KEY, MAX, "10", "1700000010.5", MAX],
    &["RL.SLIDINGWINDOW", KEY, "10", "60", "1700000000.5", "1"],
    &["RL.SLIDINGWINDOW", KEY, "9007199254740991", "3600", "*", "3"],
    &["RL.SLIDINGWINDOW", KEY, "1", "0.001", "18446744073709.551615", "0"],
    &["RL.SLIDINGWINDOW", KEY, MAX, "10", "1700000010.5", MAX],
    &["RL.SLIDINGLOG", KEY, "10", "60", "1700000000.5", "1"],
    &["RL.SLIDINGLOG", KEY, "9007199254740991", "3600", "*", "3"],
    &["RL.SLIDINGLOG", KEY, "1", "0.001", "18446744073709.551615", "0"],
    &["RL.SLIDINGLOG", KEY, MAX, "10", "1700000010.5", MAX],
    &["RL.THROTTLE", KEY, "5", "10", "60", "1"],
    &["RL.THROTTLE", KEY, "0", "1", "1", "0"],
    &["RL.ACQUIRE", KEY, "10", "60", "1700000000.5", "1"],
    &["RL.ACQUIRE", KEY, "9007199254740991", "3600", "*", "3"],
    &["RL.ACQUIRE", KEY, "1", "0.001", "18446744073709.551615", "0"],
    &["RL.PEEK", KEY, "CONCURRENCY", "5", "1000000000000", "253402300799.999999", "2"],
    &["RL.RELEASE", KEY, "1", "1700000000.5"],
    &["RL.RELEASE", KEY, "9007199254740991", "*"],
    &["RL.RENEW", KEY, "2", "1000000000000", "1700000000.5"],
    &["RL.RENEW", KEY, "3", "0.001", "*"],
];

/// A command, its two parameters, then `(now, n)` per call.
type Recipe = (&'static str, &'static str, &'static str, &'static [(&'static str, &'static str)]);

/// Limiter calls whose DUMPs are seeds. Each leaves a key that lives for
/// seconds at least; one whose parameters the module refuses (large buckets
/// before they existed) is no seed.
const RECIPES: &[Recipe] = &[
    ("RL.TOKENBUCKET", "10", "1", &[("1700000000", "1")]),
    ("RL.TOKENBUCKET", "10", "0.5", &[("1700000000.123456", "10")]),
    ("RL.TOKENBUCKET", "18446744", "0.001", &[("*", "18446743")]),
    ("RL.TOKENBUCKET", "1", "0.001", &[("0", "1")]),
    ("RL.TOKENBUCKET", "9007199254740991", "10000", &[("1700000000", "9007199254740000")]),
    ("RL.LEAKYBUCKET", "10", "1", &[("1700000000", "1"), ("1700000000.5", "3")]),
    ("RL.LEAKYBUCKET", "18446744", "0.001", &[("*", "9000000")]),
    ("RL.LEAKYBUCKET", "5", "0.1", &[("1", "5")]),
    ("RL.LEAKYBUCKET", "9007199254740991", "10000", &[("1700000000", "9007199254740000")]),
    ("RL.FIXEDWINDOW", "10", "60", &[("1700000000", "1"), ("1700000001", "2")]),
    ("RL.FIXEDWINDOW", "9007199254740991", "3600", &[("*", "9007199254740991")]),
    ("RL.FIXEDWINDOW", "3", "86400", &[("0", "3")]),
    ("RL.SLIDINGWINDOW", "10", "60", &[("1700000000", "4"), ("1700000060.5", "3")]),
    ("RL.SLIDINGWINDOW", "1000000", "3600", &[("*", "999")]),
    ("RL.SLIDINGWINDOW", "7", "100", &[("1700000000.000001", "7")]),
    ("RL.SLIDINGLOG", "10", "60", &[("1700000000", "1")]),
    ("RL.SLIDINGLOG", "1000", "3600", &[("*", "5"), ("*", "7")]),
    ("RL.ACQUIRE", "10", "60", &[("1700000000", "1"), ("1700000001", "2")]),
    ("RL.ACQUIRE", "9007199254740991", "1000000000000", &[("*", "9007199254740991")]),
    ("RL.ACQUIRE", "3", "86400", &[("0", "1"), ("3600", "1"), ("7200.000001", "1")]),
];

/// RL.SETSTATE arguments after the key whose DUMPs are seeds too.
const SET_STATES: &[&[&str]] = &[
    &["TOKENBUCKET", "0", "0"],
    &["TOKENBUCKET", MAX, MAX],
    &["LEAKYBUCKET", "9007199254740992", "1700000000000000"],
    &["FIXEDWINDOW", "1700000000000000", "9007199254740991"],
    &["SLIDINGWINDOW", "1", "2", "3"],
    &["SLIDINGWINDOW", MAX, "9007199254740991", "9007199254740992"],
    &["SLIDINGLOG", "PXAT", "99999999999999"],
    &["SLIDINGLOG", "0", "1"],
    &["SLIDINGLOG", "1700000000000000", "1", "1700000000000000", "2", "1700000000000001", "3"],
    &["SLIDINGLOG", "18446744073709551614", "9007199254740991"],
    &["SLIDINGLOG", "1700000000000000", "9007199254740991"],
    // Wide buckets (past 64 bits of pico-units), and RL.THROTTLE's state.
    &["TOKENBUCKET", "9007199254740991000000000000", "1700000000000000"],
    &["LEAKYBUCKET", "18446745000000000000", "1700000000000000"],
    &["THROTTLE", "4102444800000000000"],
    // Leases: last_us, next_id, then (id, expires_us, n) per lease.
    &["CONCURRENCY", "1700000000000000", "2", "1", "1700000000000001", "1"],
    &[
        "CONCURRENCY",
        "0",
        "9007199254740992",
        "9007199254740991",
        "1000000000000000000",
        "9007199254740991",
    ],
    &[
        "CONCURRENCY",
        "1700000000000000",
        "1000",
        "3",
        "1700000060000000",
        "2",
        "999",
        "1700003600000000",
        "5",
    ],
];

const RDB_TYPE_MODULE_2: u8 = 7;
const OPCODE_EOF: u64 = 0;
const OPCODE_SINT: u64 = 1;
const OPCODE_UINT: u64 = 2;
const OPCODE_FLOAT: u64 = 3;
const OPCODE_DOUBLE: u64 = 4;
const OPCODE_STRING: u64 = 5;
/// The low bits of a module type id: its encoding version. Redis finds the
/// type by the bits above them and passes these to the loader.
const ENCVER_BITS: u64 = 10;
const ENCVER_MASK: u64 = (1 << ENCVER_BITS) - 1;

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// The payload of issue 8: a token bucket's module id and nothing after it.
const ISSUE_8_PAYLOAD: &[u8] =
    b"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x0a\x00\x92\x34\x97\x5c\xb3\xff\x2f\x43";

// ---------------------------------------------------------------- RDB codec

/// `value` as rdbSaveLen writes it: the shortest of its forms.
fn len_bytes(value: u64) -> Vec<u8> {
    len_forms(value).swap_remove(0)
}

/// Every form of `value` that rdbLoadLen reads back as `value`, the
/// shortest first; Redis writes only the shortest.
fn len_forms(value: u64) -> Vec<Vec<u8>> {
    let mut forms = Vec::new();
    if value < 64 {
        forms.push(vec![value as u8]);
    }
    if value < 16384 {
        forms.push(vec![0x40 | (value >> 8) as u8, value as u8]);
    }
    if let Ok(short) = u32::try_from(value) {
        forms.push([&[0x80][..], &short.to_be_bytes()].concat());
    }
    forms.push([&[0x81][..], &value.to_be_bytes()].concat());
    forms
}

/// Appends the version and CRC-64 footer that RESTORE checks.
fn seal(body: &[u8], version: u16) -> Vec<u8> {
    let mut payload = [body, &version.to_le_bytes()].concat();
    let crc = CRC64.checksum(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    payload
}

fn footer_is_valid(payload: &[u8]) -> bool {
    let Some(split) = payload.len().checked_sub(8) else { return false };
    let (signed, crc) = payload.split_at(split);
    CRC64.checksum(signed).to_le_bytes() == crc
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads RDB encodings from a byte slice; `None` when it ends too early.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let taken = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(taken)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    /// rdbLoadLenByRef: the value, and whether it names a special string
    /// encoding (the 11xxxxxx form) rather than a length.
    fn len(&mut self) -> Option<(u64, bool)> {
        let first = self.byte()?;
        match first >> 6 {
            0 => Some((u64::from(first), false)),
            1 => Some(((u64::from(first & 0x3f) << 8) | u64::from(self.byte()?), false)),
            3 => Some((u64::from(first & 0x3f), true)),
            _ if first == 0x80 => {
                Some((u64::from(u32::from_be_bytes(self.take(4)?.try_into().ok()?)), false))
            }
            _ if first == 0x81 => Some((u64::from_be_bytes(self.take(8)?.try_into().ok()?), false)),
            _ => None,
        }
    }

    fn plain_len(&mut self) -> Option<u64> {
        self.len().filter(|(_, special)| !special).map(|(len, _)| len)
    }

    /// rdbGenericLoadStringObject: a string's contents, whatever its encoding.
    fn string(&mut self) -> Option<Vec<u8>> {
        let (len, special) = self.len()?;
        let number = |bytes: &[u8]| match bytes.len() {
            1 => i64::from(bytes[0] as i8),
            2 => i64::from(i16::from_le_bytes([bytes[0], bytes[1]])),
            _ => i64::from(i32::from_le_bytes(bytes.try_into().unwrap_or_default())),
        };
        match (special, len) {
            (false, len) => Some(self.take(usize::try_from(len).ok()?)?.to_vec()),
            (true, 0..=2) => Some(number(self.take(1 << len)?).to_string().into_bytes()),
            (true, 3) => {
                let compressed_len = self.plain_len()?;
                let len = self.plain_len()?;
                lzf_decompress(self.take(usize::try_from(compressed_len).ok()?)?, len)
            }
            _ => None,
        }
    }
}

/// lzf_d.c: literal runs (control < 32) and back references.
fn lzf_decompress(input: &[u8], len: u64) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(usize::try_from(len).ok()?.min(1 << 20));
    let mut bytes = input.iter().copied();
    while let Some(control) = bytes.next() {
        let control = usize::from(control);
        if control < 32 {
            for _ in 0..=control {
                out.push(bytes.next()?);
            }
            continue;
        }
        let mut run = control >> 5;
        if run == 7 {
            run += usize::from(bytes.next()?);
        }
        let back = ((control & 0x1f) << 8) + usize::from(bytes.next()?) + 1;
        let from = out.len().checked_sub(back)?;
        // Byte by byte: the source may overlap what this copy appends.
        for at in from..from + run + 2 {
            out.push(out[at]);
        }
    }
    (out.len() as u64 == len).then_some(out)
}

// ------------------------------------------------------------ payload model

/// What a module opcode carries, as far as the mutations care.
#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Uint(u64),
    Str(Vec<u8>),
    Other,
    Eof,
}

/// One module opcode with its operand, and its bytes exactly as they were,
/// so that an unmutated dump serializes back to the same payload.
#[derive(Debug, Clone)]
struct Op {
    operand: Operand,
    raw: Vec<u8>,
}

impl Op {
    fn uint(value: u64) -> Op {
        Op {
            operand: Operand::Uint(value),
            raw: [len_bytes(OPCODE_UINT), len_bytes(value)].concat(),
        }
    }

    fn string(bytes: &[u8]) -> Op {
        let raw =
            [len_bytes(OPCODE_STRING), len_bytes(bytes.len() as u64), bytes.to_vec()].concat();
        Op { operand: Operand::Str(bytes.to_vec()), raw }
    }

    fn eof() -> Op {
        Op { operand: Operand::Eof, raw: len_bytes(OPCODE_EOF) }
    }

    /// The same op under another opcode, the rest of its bytes unchanged.
    fn with_opcode(&self, opcode: &[u8]) -> Op {
        let mut reader = Reader { bytes: &self.raw, at: 0 };
        let _ = reader.len();
        let rest = &self.raw[reader.at.clamp(1, self.raw.len())..];
        Op { operand: Operand::Other, raw: [opcode, rest].concat() }
    }
}

/// A parsed DUMP payload of a module value.
#[derive(Debug, Clone)]
struct Dump {
    module_id: u64,
    ops: Vec<Op>,
    version: u16,
}

impl Dump {
    fn parse(payload: &[u8]) -> Dump {
        assert!(footer_is_valid(payload), "CRC-64 of a real DUMP: {}", hex(payload));
        let body = &payload[..payload.len() - 10];
        let version = u16::from_le_bytes([payload[body.len()], payload[body.len() + 1]]);
        let mut reader = Reader { bytes: body, at: 0 };
        assert_eq!(reader.byte(), Some(RDB_TYPE_MODULE_2), "{}", hex(payload));
        let module_id = reader.plain_len().expect("module id");
        let mut ops = Vec::new();
        while ops.last().is_none_or(|op: &Op| op.operand != Operand::Eof) {
            let start = reader.at;
            let value = read_op(&mut reader).unwrap_or_else(|| panic!("opcode: {}", hex(payload)));
            ops.push(Op { operand: value, raw: body[start..reader.at].to_vec() });
        }
        assert_eq!(reader.at, body.len(), "bytes after EOF: {}", hex(payload));
        let dump = Dump { module_id, ops, version };
        assert_eq!(dump.payload(), payload, "the parsed dump serializes back");
        dump
    }

    fn body(&self) -> Vec<u8> {
        let mut body = vec![RDB_TYPE_MODULE_2];
        body.extend(len_bytes(self.module_id));
        for op in &self.ops {
            body.extend_from_slice(&op.raw);
        }
        body
    }

    fn payload(&self) -> Vec<u8> {
        seal(&self.body(), self.version)
    }

    fn with_ops(&self, ops: Vec<Op>) -> Vec<u8> {
        Dump { ops, ..self.clone() }.body()
    }

    /// Positions of the UINT ops; the first is the kind tag.
    fn uints(&self) -> Vec<usize> {
        (0..self.ops.len()).filter(|&i| matches!(self.ops[i].operand, Operand::Uint(_))).collect()
    }

    fn uint(&self, i: usize) -> u64 {
        match self.ops[i].operand {
            Operand::Uint(value) => value,
            _ => panic!("op {i} is not a UINT"),
        }
    }

    fn kind(&self) -> Option<u64> {
        self.uints().first().map(|&i| self.uint(i))
    }

    fn eof_at(&self) -> usize {
        self.ops.len() - 1
    }
}

/// One module opcode and its operand (module.c RM_Save*/RM_Load*).
fn read_op(reader: &mut Reader) -> Option<Operand> {
    match reader.plain_len()? {
        OPCODE_EOF => Some(Operand::Eof),
        OPCODE_UINT => Some(Operand::Uint(reader.plain_len()?)),
        OPCODE_STRING => Some(Operand::Str(reader.string()?)),
        OPCODE_SINT => reader.plain_len().map(|_| Operand::Other),
        OPCODE_FLOAT => reader.take(4).map(|_| Operand::Other),
        OPCODE_DOUBLE => reader.take(8).map(|_| Operand::Other),
        _ => None,
    }
}

// --------------------------------------------------------------- mutations

/// Makes payload bodies (without the footer) from one seed.
type Mutation = fn(&Dump, &mut StdRng) -> Vec<Vec<u8>>;

const MUTATIONS: &[(&str, Mutation)] = &[
    ("bit flips", bit_flips),
    ("truncation", truncations),
    ("extension", extensions),
    ("wrong opcodes", wrong_opcodes),
    ("early EOF", early_eofs),
    ("string lengths", string_lengths),
    ("field values", field_values),
    ("length forms", length_forms),
    ("swapped ops", swapped_ops),
    ("kind tag", kind_tags),
    ("module id", module_ids),
    ("sliding log runs", log_runs),
];

/// Edge values for any number the loader reads.
const EDGES: [u64; 7] = [0, 1, u64::MAX, 1 << 53, (1 << 53) - 1, 1 << 63, u32::MAX as u64];

/// 1 to 3 flipped bits each, anywhere after the type byte: what comes
/// before the module id is Redis's own to parse, not the module's.
fn bit_flips(dump: &Dump, rng: &mut StdRng) -> Vec<Vec<u8>> {
    let body = dump.body();
    (0..24)
        .map(|_| {
            let mut flipped = body.clone();
            for _ in 0..rng.gen_range(1..=3) {
                flipped[rng.gen_range(1..body.len())] ^= 1 << rng.gen_range(0..8);
            }
            flipped
        })
        .collect()
}

/// Cut everywhere in a short body; in a long one at and around every op
/// boundary and at random places inside the ops.
fn truncations(dump: &Dump, rng: &mut StdRng) -> Vec<Vec<u8>> {
    let body = dump.body();
    let mut cuts: Vec<usize> = if body.len() <= 80 {
        (1..body.len()).collect()
    } else {
        let mut boundaries = vec![1 + len_bytes(dump.module_id).len()];
        for op in &dump.ops {
            boundaries.push(boundaries[boundaries.len() - 1] + op.raw.len());
        }
        let near = boundaries.iter().flat_map(|&b| [b - 1, b, b + 1, b + 2]);
        near.chain((0..24).map(|_| rng.gen_range(1..body.len()))).collect()
    };
    cuts.retain(|&cut| (1..body.len()).contains(&cut));
    cuts.sort_unstable();
    cuts.dedup();
    cuts.into_iter().map(|cut| body[..cut].to_vec()).collect()
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.r#gen()).collect()
}

/// Random bytes after the EOF, in its place, and between ops; an extra op
/// of each kind before the EOF.
fn extensions(dump: &Dump, rng: &mut StdRng) -> Vec<Vec<u8>> {
    let body = dump.body();
    let mut bodies = Vec::new();
    for len in [1, 2, 9, 33] {
        bodies.push([&body[..], &random_bytes(rng, len)].concat());
        bodies.push([&body[..body.len() - 1], &random_bytes(rng, len)].concat());
        let mut ops = dump.ops.clone();
        let at = rng.gen_range(0..ops.len());
        ops.insert(at, Op { operand: Operand::Other, raw: random_bytes(rng, len) });
        bodies.push(dump.with_ops(ops));
    }
    for extra in [Op::uint(1), Op::uint(u64::MAX), Op::string(b"\x00\x01"), Op::string(b"")] {
        let mut ops = dump.ops.clone();
        ops.insert(dump.eof_at(), extra);
        bodies.push(dump.with_ops(ops));
    }
    bodies
}

/// Each op under every other opcode, unknown ones, and forms rdbLoadLen
/// refuses (0x82) or reads as another number (0xc2 reads as 2).
fn wrong_opcodes(dump: &Dump, _: &mut StdRng) -> Vec<Vec<u8>> {
    let opcodes: [&[u8]; 11] = [
        b"\x00", b"\x01", b"\x02", b"\x03", b"\x04", b"\x05", b"\x06", b"\x3f", b"\xc2", b"\x82",
        b"\xff",
    ];
    let mut bodies = Vec::new();
    for (i, op) in dump.ops.iter().enumerate() {
        for opcode in opcodes.iter().filter(|&&opcode| !op.raw.starts_with(opcode)) {
            let mut ops = dump.ops.clone();
            ops[i] = op.with_opcode(opcode);
            bodies.push(dump.with_ops(ops));
        }
    }
    bodies
}

/// An EOF before each op: with the ops after it dropped, and kept.
fn early_eofs(dump: &Dump, _: &mut StdRng) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    for i in 0..dump.eof_at() {
        let before = dump.ops[..i].to_vec();
        bodies.push(dump.with_ops([before.clone(), vec![Op::eof()]].concat()));
        bodies.push(dump.with_ops([before, vec![Op::eof()], dump.ops[i..].to_vec()].concat()));
    }
    bodies
}

/// Lengths that promise more or fewer bytes than follow.
fn wrong_lengths(len: u64) -> Vec<u64> {
    let near = [len + 1, len.saturating_sub(1), len + 1000, u64::from(u32::MAX), 1 << 32];
    near.into_iter().chain([1 << 40, 1 << 53, 1 << 63, u64::MAX]).filter(|&l| l != len).collect()
}

/// Every string op with wrong lengths (for an LZF string both of them),
/// as an integer-encoded string, with an unknown encoding; and a huge
/// string where each UINT stands, for the kinds that have no string.
fn string_lengths(dump: &Dump, _: &mut StdRng) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    let mut replace = |i: usize, raw: Vec<u8>| {
        let mut ops = dump.ops.clone();
        ops[i] = Op { operand: Operand::Other, raw };
        bodies.push(dump.with_ops(ops));
    };
    for (i, op) in dump.ops.iter().enumerate() {
        let opcode = len_bytes(OPCODE_STRING);
        match op.operand {
            Operand::Str(_) => {
                for raw in restated_string_lengths(&op.raw[opcode.len()..]) {
                    replace(i, [opcode.clone(), raw].concat());
                }
                for encoded in [&b"\xc0\x05"[..], b"\xc1\x00\x80", b"\xc2\xff\xff\xff\x7f", b"\xc4"]
                {
                    replace(i, [&opcode[..], encoded].concat());
                }
            }
            Operand::Uint(_) => {
                for len in wrong_lengths(8) {
                    replace(i, [opcode.clone(), len_bytes(len), vec![0; 8]].concat());
                }
            }
            _ => {}
        }
    }
    bodies
}

/// A string's encoding (after its opcode) with each length replaced by
/// wrong ones, the bytes after it unchanged.
fn restated_string_lengths(encoded: &[u8]) -> Vec<Vec<u8>> {
    let mut reader = Reader { bytes: encoded, at: 0 };
    let Some((len, special)) = reader.len() else { return Vec::new() };
    let mut variants = Vec::new();
    if !special {
        for wrong in wrong_lengths(len) {
            variants.push([len_bytes(wrong), encoded[reader.at..].to_vec()].concat());
        }
    } else if len == 3 {
        // LZF: the compressed length, then the plain length, then the data.
        let header = reader.at;
        let Some(compressed) = reader.plain_len() else { return variants };
        let after_compressed = reader.at;
        let Some(plain) = reader.plain_len() else { return variants };
        let data = &encoded[reader.at..];
        for wrong in wrong_lengths(compressed) {
            variants
                .push([&encoded[..header], &len_bytes(wrong), &len_bytes(plain), data].concat());
        }
        for wrong in wrong_lengths(plain) {
            variants.push([&encoded[..after_compressed], &len_bytes(wrong), data].concat());
        }
    }
    variants
}

/// Each UINT after the kind tag set to edge values, its neighbours and
/// random numbers.
fn field_values(dump: &Dump, rng: &mut StdRng) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    for &i in dump.uints().iter().skip(1) {
        let value = dump.uint(i);
        let near =
            [value.wrapping_add(1), value.wrapping_sub(1), rng.r#gen(), rng.gen_range(0..1 << 32)];
        for new in EDGES.into_iter().chain(near).filter(|&new| new != value) {
            let mut ops = dump.ops.clone();
            ops[i] = Op::uint(new);
            bodies.push(dump.with_ops(ops));
        }
    }
    bodies
}

/// Every UINT and opcode in every wider form rdbLoadLen accepts: the same
/// state, spelled as Redis never writes it.
fn length_forms(dump: &Dump, _: &mut StdRng) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    for (i, op) in dump.ops.iter().enumerate() {
        let Operand::Uint(value) = op.operand else { continue };
        for opcode in len_forms(OPCODE_UINT) {
            for form in len_forms(value) {
                let mut ops = dump.ops.clone();
                ops[i] = Op { operand: op.operand.clone(), raw: [opcode.clone(), form].concat() };
                bodies.push(dump.with_ops(ops));
            }
        }
    }
    bodies
}

/// Every pair of ops before the EOF swapped.
fn swapped_ops(dump: &Dump, _: &mut StdRng) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    for i in 0..dump.eof_at() {
        for j in i + 1..dump.eof_at() {
            if dump.ops[i].raw != dump.ops[j].raw {
                let mut ops = dump.ops.clone();
                ops.swap(i, j);
                bodies.push(dump.with_ops(ops));
            }
        }
    }
    bodies
}

/// The kind tag (the first UINT) set to every other kind and to unknown ones.
fn kind_tags(dump: &Dump, _: &mut StdRng) -> Vec<Vec<u8>> {
    let Some(&at) = dump.uints().first() else { return Vec::new() };
    let tags = (0..=9).chain([63, 64, 255, 1 << 32, u64::MAX]);
    let mut bodies = Vec::new();
    for tag in tags.filter(|&tag| tag != dump.uint(at)) {
        let mut ops = dump.ops.clone();
        ops[at] = Op::uint(tag);
        bodies.push(dump.with_ops(ops));
    }
    bodies
}

/// The module id with other encoding versions (Redis passes them to the
/// loader) and with its type name changed (Redis refuses those itself).
fn module_ids(dump: &Dump, rng: &mut StdRng) -> Vec<Vec<u8>> {
    let (name, encver) = (dump.module_id & !ENCVER_MASK, dump.module_id & ENCVER_MASK);
    let versions =
        [0, 1, 2, 3, 4, 5, 7, 8, 100, 1023, encver + 1].map(|v| name | (v & ENCVER_MASK));
    let renamed = (name ^ (1u64 << rng.gen_range(ENCVER_BITS..64))) | encver;
    let ids = versions.into_iter().chain([renamed]).filter(|&id| id != dump.module_id);
    ids.map(|module_id| Dump { module_id, ..dump.clone() }.body()).collect()
}

// ------------------------------------------------ the sliding log's runs

/// What the test knows of a sliding log: the string op holding its runs,
/// decoded as LEB128 varints (time since the previous run, count), and the
/// UINTs that hold the total count and the first and last times, found by
/// their values.
struct LogView {
    runs_at: usize,
    runs: Vec<(u64, u64)>,
    total_at: Option<usize>,
    first_last_at: Option<(usize, usize)>,
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varints(bytes: &[u8]) -> Option<Vec<u64>> {
    let mut values = Vec::new();
    let mut bytes = bytes.iter();
    while let Some(&byte) = bytes.next() {
        let (mut value, mut shift, mut byte) = (0u64, 0, byte);
        loop {
            value |= u64::from(byte & 0x7f).checked_shl(shift).filter(|_| shift < 64)?;
            if byte < 0x80 {
                break;
            }
            (shift, byte) = (shift + 7, *bytes.next()?);
        }
        values.push(value);
    }
    Some(values)
}

fn encode_runs(runs: &[(u64, u64)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for &(delta, count) in runs {
        put_varint(&mut bytes, delta);
        put_varint(&mut bytes, count);
    }
    bytes
}

impl LogView {
    fn of(dump: &Dump) -> Option<LogView> {
        let runs_at = dump.ops.iter().position(|op| matches!(op.operand, Operand::Str(_)))?;
        let Operand::Str(bytes) = &dump.ops[runs_at].operand else { return None };
        let values = varints(bytes).filter(|values| values.len() % 2 == 0)?;
        let runs: Vec<(u64, u64)> = values.chunks(2).map(|run| (run[0], run[1])).collect();
        let fields: Vec<usize> = dump.uints().into_iter().skip(1).collect();
        let sum =
            |pick: fn(&(u64, u64)) -> u64| runs.iter().map(pick).fold(0u64, u64::saturating_add);
        let (total, span) = (sum(|run| run.1), sum(|run| run.0));
        let total_at = fields.iter().copied().rfind(|&i| dump.uint(i) == total);
        let pairs = fields.iter().flat_map(|&i| fields.iter().map(move |&j| (i, j)));
        let first_last_at = pairs
            .filter(|&(i, j)| i != j && Some(i) != total_at && Some(j) != total_at)
            .find(|&(i, j)| dump.uint(j).checked_sub(dump.uint(i)) == Some(span));
        Some(LogView { runs_at, runs, total_at, first_last_at })
    }

    /// The dump with other runs (as a plain string) and fields set as given.
    fn body(&self, dump: &Dump, runs: &[u8], fields: &[(Option<usize>, u64)]) -> Vec<u8> {
        let mut ops = dump.ops.clone();
        ops[self.runs_at] = Op::string(runs);
        for &(at, value) in fields {
            if let Some(at) = at {
                ops[at] = Op::uint(value);
            }
        }
        dump.with_ops(ops)
    }

    /// The dump with other runs and the total, first and last times that
    /// match them: a state the loader may well accept.
    fn consistent(&self, dump: &Dump, runs: &[(u64, u64)]) -> Vec<u8> {
        let total = runs.iter().map(|run| run.1).fold(0u64, u64::saturating_add);
        let span = runs.iter().map(|run| run.0).fold(0u64, u64::saturating_add);
        let first = self.first_last_at.map_or(0, |(first, _)| dump.uint(first));
        let (first_at, last_at) = self.first_last_at.unzip();
        let fields =
            [(self.total_at, total), (first_at, first), (last_at, first.saturating_add(span))];
        self.body(dump, &encode_runs(runs), &fields)
    }
}

/// Malformed varints, trailing bytes, times going backwards or past
/// u64::MAX, zero counts, totals and times that don't add up.
fn log_runs(dump: &Dump, rng: &mut StdRng) -> Vec<Vec<u8>> {
    let Some(view) = LogView::of(dump) else { return Vec::new() };
    let runs = &view.runs;
    let bytes = encode_runs(runs);
    let total = view.total_at.map_or(0, |at| dump.uint(at));
    let mut bodies = vec![
        // The same runs, uncompressed: valid.
        view.body(dump, &bytes, &[]),
        // A varint cut short, one with no end, and one past 64 bits.
        view.body(dump, &[&bytes[..], b"\x80"].concat(), &[]),
        view.body(
            dump,
            &[&bytes[..], b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"].concat(),
            &[],
        ),
        view.body(
            dump,
            &[&bytes[..], b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"].concat(),
            &[],
        ),
        // A time without its count.
        view.body(dump, &[&bytes[..], b"\x00"].concat(), &[]),
        // A run more than the total says, and the same run with the total.
        view.body(dump, &[&bytes[..], b"\x00\x01"].concat(), &[]),
        view.consistent(dump, &[&runs[..], &[(0, 1)]].concat()),
        // Random bytes of the same length.
        view.body(dump, &random_bytes(rng, bytes.len()), &[]),
        // Totals that don't add up.
        view.body(dump, &bytes, &[(view.total_at, total.wrapping_add(1))]),
        view.body(dump, &bytes, &[(view.total_at, total.wrapping_sub(1))]),
        view.body(dump, &bytes, &[(view.total_at, 0)]),
        view.body(dump, &bytes, &[(view.total_at, u64::MAX)]),
        // No runs but a total, and counts summing past u64::MAX.
        view.body(dump, b"", &[]),
        view.consistent(dump, &[(0, 1 << 63), (1, 1 << 63)]),
        view.consistent(dump, &[(0, u64::MAX), (0, 1)]),
        // Large but valid numbers.
        view.consistent(dump, &[(0, (1 << 53) - 1), (1 << 40, 1 << 53)]),
    ];
    if let Some((first_at, last_at)) = view.first_last_at {
        let (first, last) = (dump.uint(first_at), dump.uint(last_at));
        for (new_first, new_last) in [
            (last, first),
            (first, last.wrapping_sub(1)),
            (first, last.wrapping_add(1)),
            (first.wrapping_add(1), last),
        ] {
            bodies.push(view.body(
                dump,
                &bytes,
                &[(Some(first_at), new_first), (Some(last_at), new_last)],
            ));
        }
        // Times past u64::MAX.
        bodies.push(view.consistent(dump, &[&runs[..], &[(u64::MAX - first, 1)]].concat()));
        bodies.push(view.body(dump, &[&bytes[..], &encode_runs(&[(u64::MAX, 1)])].concat(), &[]));
    }
    if let Some(&(_, count)) = runs.first() {
        // A first run not at the first time; zero counts.
        let mut shifted = runs.clone();
        shifted[0].0 = 1;
        bodies.push(view.body(dump, &encode_runs(&shifted), &[]));
        bodies.push(view.consistent(dump, &shifted));
        let mut zero = runs.clone();
        zero[0].1 = 0;
        bodies.push(view.body(dump, &encode_runs(&zero), &[]));
        bodies.push(view.consistent(dump, &zero));
        let last = zero.len() - 1;
        (zero[0].1, zero[last].1) = (count, 0);
        bodies.push(view.consistent(dump, &zero));
        // The last byte cut off, and an overlong (but same) first delta.
        bodies.push(view.body(dump, &bytes[..bytes.len() - 1], &[]));
        let overlong = [&b"\x80\x00"[..], &bytes[1..]].concat();
        bodies.push(view.body(dump, &overlong, &[]));
    }
    bodies
}

// ------------------------------------------------------------- the server

/// What the server answered: a reply or an error reply (as `CODE detail`).
/// `Err` is for the connection failing: the server is gone or hung.
fn ask(con: &mut Connection, args: &[&[u8]]) -> Result<Result<Value, String>, String> {
    let mut cmd = redis::cmd(&String::from_utf8_lossy(args[0]));
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    match cmd.query::<Value>(con) {
        Ok(value) => Ok(Ok(value)),
        Err(e) if matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) => {
            Ok(Err(format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))))
        }
        Err(e) => Err(format!("the connection failed ({e})")),
    }
}

fn ask_str(con: &mut Connection, args: &[&str]) -> Result<Result<Value, String>, String> {
    ask(con, &args.iter().map(|arg| arg.as_bytes()).collect::<Vec<_>>())
}

fn dump_of(con: &mut Connection, key: &str) -> Result<Option<Vec<u8>>, String> {
    match ask_str(con, &["DUMP", key])? {
        Ok(Value::BulkString(bytes)) => Ok(Some(bytes)),
        Ok(Value::Nil) => Ok(None),
        other => Err(format!("DUMP {key} answered {other:?}")),
    }
}

fn exists(con: &mut Connection, key: &str) -> Result<bool, String> {
    match ask_str(con, &["EXISTS", key])? {
        Ok(Value::Int(n)) => Ok(n == 1),
        other => Err(format!("EXISTS {key} answered {other:?}")),
    }
}

/// One of `CALLS` on `key`: true for a reply, false for an error reply.
fn run_call(con: &mut Connection, call: &[&str], key: &str) -> Result<bool, String> {
    let args: Vec<&str> = call.iter().map(|&arg| if arg == KEY { key } else { arg }).collect();
    let answer = ask_str(con, &args).map_err(|e| format!("{args:?}: {e}"))?;
    Ok(answer.is_ok())
}

/// Must answer: what the test asks of every command it sends.
fn expect_ok(con: &mut Connection, args: &[&str]) -> Result<Value, String> {
    ask_str(con, args)?.map_err(|e| format!("{args:?} answered {e}"))
}

/// The log's last lines before a crash report and the report's opening,
/// which names the fault; without a report, the log's last lines.
fn log_excerpt(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let end = lines
        .iter()
        .rposition(|line| line.contains("Guru Meditation"))
        .map_or(lines.len(), |at| at + 1);
    lines[end.saturating_sub(12)..end].join("\n")
}

// ------------------------------------------------------------------- seeds

fn seconds(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

/// The key's DUMP, parsed; `made_by` says how the key was made.
fn seed_from_key(con: &mut Connection, key: &str, made_by: String) -> Dump {
    let payload = dump_of(con, key).unwrap().unwrap_or_else(|| panic!("{made_by}: no key"));
    Dump::parse(&payload)
}

fn recipe_seeds(con: &mut Connection) -> Vec<Dump> {
    let mut seeds = Vec::new();
    for (i, (command, a, b, calls)) in RECIPES.iter().enumerate() {
        let key = format!("seed:recipe:{i}");
        let mut answers = calls.iter().map(|(now, n)| ask_str(con, &[command, &key, a, b, now, n]));
        if answers.all(|answer| answer.unwrap().is_ok()) {
            seeds.push(seed_from_key(con, &key, format!("{command} {a} {b} {calls:?}")));
        }
    }
    seeds
}

/// Sliding logs of hundreds of calls: regular gaps (which LZF compresses),
/// random gaps and counts, gaps of seconds (long varints), and a log whose
/// oldest runs have left the window.
fn many_run_seeds(con: &mut Connection, rng: &mut StdRng) -> Vec<Dump> {
    let start = 1_700_000_000_000_000u64;
    let random: Vec<(u64, u64)> =
        (0..300).map(|_| (rng.gen_range(1..1 << 20), rng.gen_range(1..1000))).collect();
    let shapes = [
        ("regular", "3600", vec![(7, 1); 300]),
        ("random", "100000", random),
        ("seconds apart", "100000", vec![(3_000_001, 2); 200]),
        ("trimmed", "10", vec![(100_000, 1); 300]),
    ];
    let mut seeds = Vec::new();
    for (name, window, gaps) in shapes {
        let key = format!("seed:log:{name}");
        let mut at = start;
        for (gap, n) in gaps {
            at += gap;
            expect_ok(
                con,
                &["RL.SLIDINGLOG", &key, "1000000000", window, &seconds(at), &n.to_string()],
            )
            .unwrap();
        }
        seeds.push(seed_from_key(con, &key, format!("RL.SLIDINGLOG, {name}")));
    }
    seeds
}

/// States written by RL.SETSTATE, one of a log of 400 random runs among
/// them; a state that RL.SETSTATE refuses is no seed.
fn set_state_seeds(con: &mut Connection, rng: &mut StdRng) -> Vec<Dump> {
    let mut long_log = vec!["SLIDINGLOG".to_string()];
    let mut at = 1_700_000_000_000_000u64;
    for _ in 0..400 {
        at += rng.gen_range(0..1 << 30);
        long_log.extend([at.to_string(), rng.gen_range(1..1u64 << 40).to_string()]);
    }
    let long_log: Vec<&str> = long_log.iter().map(String::as_str).collect();
    let mut seeds = Vec::new();
    for (i, state) in SET_STATES.iter().chain([&&long_log[..]]).enumerate() {
        let key = format!("seed:setstate:{i}");
        let args = [&["RL.SETSTATE", &key][..], state].concat();
        if ask_str(con, &args).unwrap().is_ok() {
            seeds.push(seed_from_key(
                con,
                &key,
                format!("RL.SETSTATE {}", state[..4.min(state.len())].join(" ")),
            ));
        }
    }
    seeds
}

/// Keys of hundreds of leases: taken at random times with random slots and
/// leases, some released and some renewed.
fn many_lease_seeds(con: &mut Connection, rng: &mut StdRng) -> Vec<Dump> {
    let mut seeds = Vec::new();
    for (name, released) in [("held", 0), ("some released", 3)] {
        let key = format!("seed:leases:{name}");
        let mut at = 1_700_000_000_000_000u64;
        for id in 1..=300u64 {
            at += rng.gen_range(0..1 << 20);
            let (lease, n) = (rng.gen_range(10_000..1_000_000).to_string(), rng.gen_range(1..50));
            let args = ["RL.ACQUIRE", &key, "1000000", &lease, &seconds(at), &n.to_string()];
            expect_ok(con, &args).unwrap();
            if released > 0 && id % released == 0 {
                expect_ok(con, &["RL.RELEASE", &key, &(id - 1).to_string(), &seconds(at)]).unwrap();
            }
        }
        seeds.push(seed_from_key(con, &key, format!("RL.ACQUIRE, {name}")));
    }
    seeds
}

fn build_seeds(con: &mut Connection) -> Vec<Dump> {
    let rng = &mut StdRng::seed_from_u64(1);
    let mut seeds = recipe_seeds(con);
    seeds.extend(many_run_seeds(con, rng));
    seeds.extend(many_lease_seeds(con, rng));
    seeds.extend(set_state_seeds(con, rng));
    let mut kinds: Vec<u64> = seeds.iter().filter_map(Dump::kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert!(kinds.len() >= 9, "seeds of every kind: kind tags {kinds:?}");
    // Runs read back (LZF included) with the total and times they add up to.
    let understood =
        |v: LogView| v.runs.len() > 100 && v.total_at.is_some() && v.first_last_at.is_some();
    let logs = seeds.iter().filter(|seed| LogView::of(seed).is_some_and(understood));
    assert!(logs.count() >= 4, "sliding logs with many runs, readable as varint pairs");
    let lzf = |op: &Op| op.raw.starts_with(&[OPCODE_STRING as u8, 0xc3]);
    assert!(seeds.iter().any(|seed| seed.ops.iter().any(lzf)), "a seed with an LZF string");
    expect_ok(con, &["FLUSHALL"]).unwrap();
    seeds
}

// -------------------------------------------------------------- the fuzzer

/// A mutation that broke something, with the payload that did it (none
/// when DEBUG RELOAD failed).
struct Failure {
    mutation: &'static str,
    payload: Vec<u8>,
    what: String,
    log: Option<String>,
}

#[derive(Default)]
struct Counts {
    payloads: usize,
    refused: usize,
    created: usize,
}

/// Keys and their DUMPs (none for a key gone meanwhile).
type Dumps = Vec<(String, Option<Vec<u8>>)>;

struct Fuzzer {
    server: Server,
    con: Connection,
    counts: Counts,
}

impl Fuzzer {
    fn start() -> Fuzzer {
        let server = Server::start(&[]);
        let con = connect(&server);
        Fuzzer { server, con, counts: Counts::default() }
    }

    fn ping(&mut self) -> Result<(), String> {
        expect_ok(&mut self.con, &["PING"]).map(drop)
    }

    /// RESTORE must refuse with `ERR Bad data format` and create no key,
    /// or create a key that everything then handles.
    fn try_payload(&mut self, payload: &[u8]) -> Result<(), String> {
        self.counts.payloads += 1;
        let key = format!("fuzz:{}", self.counts.payloads);
        let answer = ask(&mut self.con, &[b"RESTORE", key.as_bytes(), b"0", payload, b"REPLACE"])
            .map_err(|e| format!("RESTORE: {e}"))?;
        self.ping().map_err(|e| format!("PING after RESTORE: {e}"))?;
        match answer {
            Err(error) if error != "ERR Bad data format" => {
                Err(format!("RESTORE answered {error}"))
            }
            Err(_) if exists(&mut self.con, &key)? => Err("RESTORE failed but made a key".into()),
            Err(_) => {
                self.counts.refused += 1;
                Ok(())
            }
            Ok(_) => {
                self.counts.created += 1;
                self.exercise(&key)
            }
        }
    }

    /// Every call on the key; after each that changed it (any reply, not
    /// an error), its DUMP must restore. Copies without expiry keep the
    /// state as restored and as the calls left it, for DEBUG RELOAD.
    fn exercise(&mut self, key: &str) -> Result<(), String> {
        self.copy_restores(key, &format!("{key}:as-restored"))?;
        let called = format!("{key}:as-called");
        for call in CALLS {
            if run_call(&mut self.con, call, key)? {
                self.copy_restores(key, &called).map_err(|e| format!("after {call:?}: {e}"))?;
            }
        }
        Ok(())
    }

    /// The key's DUMP restores into `copy`, which DUMPs the same.
    fn copy_restores(&mut self, key: &str, copy: &str) -> Result<(), String> {
        let Some(payload) = dump_of(&mut self.con, key)? else { return Ok(()) };
        let restore =
            ask(&mut self.con, &[b"RESTORE", copy.as_bytes(), b"0", &payload, b"REPLACE"])?;
        restore.map_err(|e| format!("RESTORE of its own DUMP {} answered {e}", hex(&payload)))?;
        match dump_of(&mut self.con, copy)? {
            Some(again) if again == payload => Ok(()),
            again => {
                Err(format!("DUMP {} restored as {:?}", hex(&payload), again.map(|a| hex(&a))))
            }
        }
    }

    /// DEBUG RELOAD saves and loads the whole dataset; every key must come
    /// back with the same DUMP and still answer every call.
    fn reload_keeps_every_key(&mut self) -> Result<(), String> {
        let before = self.dump_every_key()?;
        if let Err(e) = expect_ok(&mut self.con, &["DEBUG", "RELOAD"]) {
            return Err(format!("{e}{}", self.first_unrestorable(&before)));
        }
        for (key, payload) in before {
            let after = dump_of(&mut self.con, &key)?;
            if after.is_some() && after != payload {
                return Err(format!("{key} changed across DEBUG RELOAD"));
            }
            for call in CALLS {
                run_call(&mut self.con, call, &key)
                    .map_err(|e| format!("after DEBUG RELOAD, {e}"))?;
            }
        }
        Ok(())
    }

    fn dump_every_key(&mut self) -> Result<Dumps, String> {
        let Value::Array(keys) = expect_ok(&mut self.con, &["KEYS", "*"])? else {
            return Err("KEYS answered no array".into());
        };
        let mut dumps = Vec::new();
        for key in keys {
            let key: String = redis::from_redis_value(key).map_err(|e| e.to_string())?;
            let payload = dump_of(&mut self.con, &key)?;
            dumps.push((key, payload));
        }
        Ok(dumps)
    }

    /// After a failed reload, names the first key whose DUMP from before it
    /// RESTORE refuses, if the server still answers.
    fn first_unrestorable(&mut self, dumps: &Dumps) -> String {
        for (key, payload) in dumps {
            let Some(payload) = payload else { continue };
            match ask(&mut self.con, &[b"RESTORE", b"probe", b"0", payload, b"REPLACE"]) {
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => return format!("; {key}'s DUMP {} answers {e}", hex(payload)),
                Err(_) => break,
            }
        }
        String::new()
    }

    /// Runs one mutation over every seed; stops at its first failure.
    fn batch(&mut self, mutation: &'static str, payloads: Vec<Vec<u8>>) -> Result<(), Failure> {
        for payload in payloads {
            if let Err(what) = self.try_payload(&payload) {
                return Err(self.failure(mutation, payload, what));
            }
        }
        let reloaded = self.reload_keeps_every_key();
        if let Err(what) = reloaded.and_then(|()| expect_ok(&mut self.con, &["FLUSHALL"]).map(drop))
        {
            return Err(self.failure(mutation, Vec::new(), what));
        }
        Ok(())
    }

    /// Describes a failure and gets a clean server for the next mutation:
    /// the same one emptied, or a new one when it went down.
    fn failure(&mut self, mutation: &'static str, payload: Vec<u8>, what: String) -> Failure {
        let alive = connect_quietly(&self.server)
            .and_then(|mut con| expect_ok(&mut con, &["FLUSHALL"]).ok().map(|_| con));
        let log = match alive {
            Some(con) => {
                self.con = con;
                None
            }
            None => {
                let log = log_excerpt(&self.server.log());
                // A crash in DEBUG RELOAD leaves its dump.rdb for the restart to trip on.
                let _ = std::fs::remove_file(self.server.dir.path().join("dump.rdb"));
                self.server.restart();
                self.con = connect(&self.server);
                Some(log)
            }
        };
        Failure { mutation, payload, what, log }
    }
}

fn connect(server: &Server) -> Connection {
    let con = server.connect();
    // A hung server fails the test instead of stalling it.
    con.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    con
}

fn connect_quietly(server: &Server) -> Option<Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).ok()?;
    let con = client.get_connection_with_timeout(Duration::from_secs(2)).ok()?;
    con.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    Some(con)
}

fn report(failures: &[Failure]) -> String {
    let mut text = String::new();
    for Failure { mutation, payload, what, log } in failures {
        text += &format!("\n== {mutation}: {what}\n");
        if !payload.is_empty() {
            text += &format!("   payload: {}\n", hex(payload));
        }
        if let Some(log) = log {
            text += &format!("   THE SERVER WENT DOWN. Its log:\n{log}\n");
        }
    }
    text
}

#[test]
fn mutated_dumps_never_crash_or_corrupt() {
    let started = Instant::now();
    let mut fuzzer = Fuzzer::start();
    let seeds = build_seeds(&mut fuzzer.con);
    let mut failures = Vec::new();
    for (i, (mutation, mutate)) in MUTATIONS.iter().enumerate() {
        // One generator per mutation: each batch is reproducible alone.
        let rng = &mut StdRng::seed_from_u64(i as u64);
        let payloads: Vec<Vec<u8>> = seeds
            .iter()
            .flat_map(|seed| mutate(seed, rng).into_iter().map(|body| seal(&body, seed.version)))
            .collect();
        assert!(!payloads.is_empty(), "{mutation} made no payload");
        if let Err(failure) = fuzzer.batch(mutation, payloads) {
            failures.push(failure);
        }
    }
    let Counts { payloads, refused, created } = fuzzer.counts;
    eprintln!(
        "{} seeds, {payloads} payloads: {refused} refused, {created} restored, in {:.1} s",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} mutations broke something:{}",
        failures.len(),
        MUTATIONS.len(),
        report(&failures)
    );
    assert!(
        payloads >= 3000 && refused > 0 && created > 0,
        "{payloads} payloads, {refused} refused, {created} restored"
    );
}

/// Issue 8's payload: CRC-valid, but the module data ends right after the
/// module id. It crashed the server; it must be refused.
#[test]
fn issue_8_payload_is_refused() {
    let server = Server::start(&[]);
    let con = &mut connect(&server);
    expect_ok(con, &["RL.SETSTATE", "real", "TOKENBUCKET", "1", "1"]).unwrap();
    let real = Dump::parse(&dump_of(con, "real").unwrap().unwrap());
    assert!(footer_is_valid(ISSUE_8_PAYLOAD), "the issue's CRC-64, as ours computes it");
    let literal_id = u64::from_be_bytes(ISSUE_8_PAYLOAD[2..10].try_into().unwrap());
    // The literal id names our type, so Redis hands the payload to our
    // loader, with an encoding version the module must still load. Until
    // the encoding version changes, it is exactly the id of a real DUMP.
    assert_eq!(literal_id & !ENCVER_MASK, real.module_id & !ENCVER_MASK, "{literal_id:x}");
    assert!(literal_id & ENCVER_MASK <= real.module_id & ENCVER_MASK, "{literal_id:x}");
    let with_real_id =
        seal(&[&[RDB_TYPE_MODULE_2][..], &len_bytes(real.module_id)].concat(), real.version);
    for payload in [ISSUE_8_PAYLOAD, &with_real_id[..]] {
        let answer = ask(con, &[b"RESTORE", b"k", b"0", payload]).unwrap_or_else(|e| {
            panic!("RESTORE {}: {e}\n{}", hex(payload), log_excerpt(&server.log()))
        });
        assert_eq!(answer, Err("ERR Bad data format".to_string()), "{}", hex(payload));
        assert!(!exists(con, "k").unwrap());
        expect_ok(con, &["PING"]).unwrap();
    }
}
