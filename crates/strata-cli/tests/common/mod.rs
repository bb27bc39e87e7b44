//! Helpers shared by the kill -9 tests of `strata db stress`, `strata lsm stress` and
//! `strata stress`.

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// Spawns `cmd` with its stdout piped, kills it with SIGKILL after `after`,
/// and returns its exit status and the whole lines it printed (a line cut
/// by the kill is not returned: it is no acknowledgement).
pub fn run_and_kill(mut cmd: Command, after: Duration) -> (ExitStatus, Vec<String>) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut lines = Vec::new();
        let mut buf = Vec::new();
        while r.read_until(b'\n', &mut buf).unwrap_or(0) > 0 {
            if buf.last() == Some(&b'\n') {
                lines.push(String::from_utf8_lossy(&buf).trim_end().to_string());
            }
            buf.clear();
        }
        lines
    });
    std::thread::sleep(after);
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    (status, reader.join().unwrap())
}

/// How many kills a kill -9 test runs: `STRATA_KILLS` if set, else 200 under
/// `STRATA_FULL=1` (the acceptance run), else `default` (a few, for CI).
pub fn kills(default: usize) -> usize {
    let full = std::env::var("STRATA_FULL").is_ok_and(|v| v == "1");
    std::env::var("STRATA_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 200 } else { default })
}

/// One write of a u64 stress run (`strata db stress`, `strata stress`).
#[allow(dead_code, reason = "used by the u64 kill tests, not by lsm_kill")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Write {
    pub key: u64,
    /// `None` for a delete.
    pub value: Option<u64>,
}

/// `begin|ack put KEY VALUE` or `begin|ack delete KEY 0`: whether it is an
/// acknowledgement, and the write; `None` for any other line.
#[allow(dead_code, reason = "used by the u64 kill tests, not by lsm_kill")]
pub fn parse(line: &str) -> Option<(bool, Write)> {
    let mut it = line.split_whitespace();
    let ack = match it.next()? {
        "begin" => false,
        "ack" => true,
        _ => return None,
    };
    let op = it.next()?;
    let key = it.next()?.parse().ok()?;
    let value: u64 = it.next()?.parse().ok()?;
    let value = match op {
        "put" => Some(value),
        "delete" => None,
        _ => return None,
    };
    Some((ack, Write { key, value }))
}
