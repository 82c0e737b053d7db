//! The README's redis-cli session, line by line, on a server with the
//! module: each `127.0.0.1:6379> command` prints the lines after it, as
//! redis-cli shows them.

mod common;

use common::Server;
use redis::Value;

/// A reply as redis-cli prints it (RESP2: integers, arrays of them, status).
fn shown(reply: &Value) -> Vec<String> {
    match reply {
        Value::Int(n) => vec![format!("(integer) {n}")],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| format!("{}) {}", i + 1, shown(item).join(" ")))
            .collect(),
        Value::SimpleString(text) => vec![text.clone()],
        Value::Okay => vec!["OK".to_string()],
        other => panic!("a reply the session does not show: {other:?}"),
    }
}

#[test]
fn the_readme_session_runs_as_shown() {
    let readme = include_str!("../README.md");
    let prompt = "127.0.0.1:6379> ";
    let start = readme.find(&format!("```\n{prompt}")).expect("the README's redis-cli session");
    let block = readme[start + 4..].split("```").next().unwrap();
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let mut lines = block.lines().peekable();
    let mut ran = 0;
    while let Some(line) = lines.next() {
        let command = line.strip_prefix(prompt).unwrap_or_else(|| panic!("not a command: {line}"));
        let mut expected = Vec::new();
        while let Some(next) = lines.next_if(|next| !next.starts_with(prompt)) {
            expected.push(next.to_string());
        }
        let words: Vec<&str> = command.split_whitespace().collect();
        let reply: Value = redis::cmd(words[0]).arg(&words[1..]).query(con).unwrap();
        assert_eq!(shown(&reply), expected, "{command}");
        ran += 1;
    }
    assert_eq!(ran, 4, "the session's commands");
}
