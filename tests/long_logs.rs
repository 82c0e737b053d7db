//! A long sliding log costs the server in proportion to what each
//! operation needs: its digest is one pass over its bytes, and commands
//! that may scan it are not flagged `fast`.

mod common;

use common::{MAX_UNITS, Server, one_a_microsecond};
use sha1_smol::Sha1;

type Digest = [u8; 20];

/// Redis's `xorDigest`: `digest ^= SHA1(bytes)`.
fn xor_digest(digest: &mut Digest, bytes: &[u8]) {
    let hash = Sha1::from(bytes).digest().bytes();
    digest.iter_mut().zip(hash).for_each(|(d, h)| *d ^= h);
}

/// Redis's `mixDigest`: `digest = SHA1(digest ^ SHA1(bytes))`.
fn mix_digest(digest: &mut Digest, bytes: &[u8]) {
    xor_digest(digest, bytes);
    *digest = Sha1::from(&digest[..]).digest().bytes();
}

/// What `DEBUG DIGEST-VALUE` answers for a module value with an expiry
/// whose digest callback adds `integers` (as decimals, as
/// RedisModule_DigestAddLongLong does), then `buffer`, in one sequence.
fn expected_digest(integers: &[u64], buffer: &[u8]) -> String {
    let mut sequence = Digest::default();
    for integer in integers {
        mix_digest(&mut sequence, integer.to_string().as_bytes());
    }
    mix_digest(&mut sequence, buffer);
    let mut value = Digest::default();
    xor_digest(&mut value, &sequence);
    // The key's: its type (OBJ_MODULE, 5, in network order), the value's,
    // and that it has an expiry.
    let mut digest = Digest::default();
    mix_digest(&mut digest, &5u32.to_be_bytes());
    xor_digest(&mut digest, &value);
    xor_digest(&mut digest, b"!!expire!!");
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A log is digested as its RDB record: kind 5, first and last time, total,
/// then the runs' bytes at once (here 1 unit a microsecond: a delta of 0
/// and a count of 1, then a delta of 1 and a count of 1 for each run after
/// the first), not as two strings a run.
#[test]
fn a_log_is_digested_as_its_canonical_bytes() {
    const RUNS: u64 = 100_000;
    let server = Server::start(&[]);
    let con = &mut server.connect();
    one_a_microsecond(con, &["RL.SLIDINGLOG", "log", MAX_UNITS, "1000000"], RUNS);
    let first_us = 1_700_000_000_000_000;
    let runs: Vec<u8> = [0, 1].into_iter().chain([1, 1].repeat(RUNS as usize - 1)).collect();
    let expected = expected_digest(&[5, first_us, first_us + RUNS - 1, RUNS], &runs);
    let digest: Vec<String> =
        redis::cmd("DEBUG").arg("DIGEST-VALUE").arg("log").query(con).unwrap();
    assert_eq!(digest, [expected]);
}
