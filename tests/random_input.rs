//! Thousands of calls with arguments drawn from valid values, edge cases
//! and garbage bytes: each gets a reply or an error, never a crash, and a
//! call that errs changes nothing.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{COMMANDS, Server, dump};

const TOKENS: [&[u8]; 24] = [
    b"1",
    b"10",
    b"0",
    b"0.5",
    b"1000",
    b"*",
    b"1700000000.123456",
    b"18446744",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-1",
    b"nan",
    b"inf",
    b"1e400",
    b"",
    b"\xff\xfe",
    b" 1",
    b"0.0000001",
    b"TOKENBUCKET",
    b"SLIDINGLOG",
    b"PXAT",
    b"99999999999999999999",
    b"3.",
    b".5",
];

fn random_arg(rng: &mut StdRng) -> Vec<u8> {
    if rng.gen_bool(0.1) {
        (0..rng.gen_range(0..12)).map(|_| rng.r#gen::<u8>()).collect()
    } else {
        TOKENS[rng.gen_range(0..TOKENS.len())].to_vec()
    }
}

#[test]
fn random_arguments_never_crash_or_corrupt() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let mut rng = StdRng::seed_from_u64(7);
    let keys = ["a", "b", "c"];
    let (mut replies, mut errors) = (0, 0);
    for _ in 0..5000 {
        let command = COMMANDS[rng.gen_range(0..COMMANDS.len())];
        // Mostly a key of the command's own kind; sometimes a shared one.
        let key = match rng.gen_bool(0.9) {
            true => format!("{command}:{}", keys[rng.gen_range(0..keys.len())]),
            false => "shared".to_string(),
        };
        let key = key.as_str();
        // A well-formed call, then perhaps one argument replaced, one
        // added or one dropped.
        let mut args: Vec<Vec<u8>> = match command {
            "RL.SETSTATE" => {
                vec![b"TOKENBUCKET".to_vec(), b"5000000000000".to_vec(), b"1000000".to_vec()]
            }
            "RL.LOGAPPLY" => ["APPEND", "0", "1000000", "1", "PXAT", "32503680000000"]
                .map(|arg| arg.as_bytes().to_vec())
                .to_vec(),
            "RL.LEASEAPPLY" => ["ACQUIRE", "1000000", "1", "2000000", "1"]
                .map(|arg| arg.as_bytes().to_vec())
                .to_vec(),
            "RL.RELEASE" => vec![b"1".to_vec(), b"*".to_vec()],
            "RL.RENEW" => vec![b"1".to_vec(), b"100000".to_vec(), b"*".to_vec()],
            // Slow enough that no key expires between the two DUMPs below.
            c if c.ends_with("BUCKET") => {
                vec![b"10".to_vec(), b"0.001".to_vec(), b"*".to_vec(), b"1".to_vec()]
            }
            _ => vec![b"10".to_vec(), b"100000".to_vec(), b"*".to_vec(), b"1".to_vec()],
        };
        match rng.gen_range(0..10) {
            0..=4 => {
                let at = rng.gen_range(0..args.len());
                args[at] = random_arg(&mut rng);
            }
            5 => args.push(random_arg(&mut rng)),
            6 => {
                args.pop();
            }
            _ => {}
        }
        let mut cmd = redis::cmd(command);
        cmd.arg(key).arg(&args);
        // The expiry first: a key that expires between the two reads is then
        // missing in `before` too, not a change.
        let expires_at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
        let before = dump(con, key);
        match cmd.query::<redis::Value>(con) {
            Ok(_) => replies += 1,
            Err(e) => {
                errors += 1;
                assert!(e.code().is_some(), "{command}: not an error reply: {e}");
                let after = dump(con, key);
                // Unchanged, unless Redis expired the key on time meanwhile
                // (a random rate or window can make that a millisecond).
                let expired =
                    after.is_none() && expires_at > 0 && common::server_ms(con) >= expires_at;
                assert!(
                    after == before || expired,
                    "{command} {args:?} erred ({e}) and changed {key}: {before:?} -> {after:?}, \
                     expiry {expires_at}"
                );
            }
        }
    }
    // Both outcomes many times over: the arguments do reach the commands.
    assert!(replies > 1000 && errors > 1000, "{replies} replies, {errors} errors");
    let pong: String = redis::cmd("PING").query(con).unwrap();
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(con).unwrap();
}
