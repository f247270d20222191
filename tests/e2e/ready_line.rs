//! The test peers' start-up convention (`tests/peer_serve.py` and every peer of
//! tests/upstream, tests/identity, tests/frameworks, tests/ops): a peer prints `READY <url>`
//! on stdout once it listens. Shared by the e2e suite and the benches (included by path).
//!
//! Invariant: the rest of stdout is read and dropped on a thread, so a chatty peer never
//! blocks on a full pipe, and a peer that never says READY costs at most `within`.

use std::io::{BufRead, BufReader};
use std::process::ChildStdout;
use std::sync::mpsc;
use std::time::Duration;

/// How long a test peer may take to say READY (Python peers import for seconds, and several
/// start at once on a small machine).
pub(crate) const READY_WITHIN: Duration = Duration::from_secs(60);

/// The URL of the first `READY <url>` line of `stdout`, if one comes within `within` (None
/// also when stdout closes first: the peer exited).
pub(crate) fn read_ready(stdout: ChildStdout, within: Duration) -> Option<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if let Some(url) = line.trim().strip_prefix("READY ") {
                let _ = tx.send(url.to_owned());
                break;
            }
        }
        for _ in lines {}
    });
    rx.recv_timeout(within).ok()
}
