//! The inbound server against hyper's (issue 18; docs/security.md "HTTP/1.1 framing"): the
//! same bytes sent to [`super::server`] and to hyper 1's HTTP/1.1 server (the one
//! `axum::serve` runs), each serving a router that records every request it acts on (its
//! method, target and whole body). The rule for every input:
//!
//! - the gateway acts on exactly the requests hyper acts on, with the same body bytes; or
//! - it is deliberately stricter: it acts on a prefix of hyper's requests and then refuses
//!   (a 4xx/5xx JSON error) and closes the connection.
//!
//! It never acts on a request hyper refuses, never acts on more requests, never reads other
//! body bytes. Inputs: the desync corpus `tests/http1/corpus.txt` (exact bytes, sent whole
//! and split), and generated requests ([`super::fuzz_tests`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use super::server::ConnectionLimits;

/// A request a server's handler acted on: method, target, body.
pub(super) type Seen = (String, String, Vec<u8>);

const LIMITS: ConnectionLimits = ConnectionLimits {
    max_connections: 4,
    max_body_bytes: 1 << 20,
    header_read: Duration::from_secs(5),
    client_write: Duration::from_secs(5),
};

/// How long a connection may stay silent before its exchange is over; a disagreement is
/// judged again with [`PATIENT`] (a loaded machine may keep a server silent for longer).
const QUIET: Duration = Duration::from_millis(150);
const PATIENT: Duration = Duration::from_millis(2000);

/// A router that records each request once its whole body is read, and answers `ok`.
fn recording(log: Arc<Mutex<Vec<Seen>>>) -> axum::Router {
    axum::Router::new().fallback(move |req: Request| {
        let log = log.clone();
        async move {
            let (method, uri) = (req.method().to_string(), req.uri().to_string());
            match axum::body::to_bytes(req.into_body(), 1 << 20).await {
                Ok(body) => {
                    log.lock().unwrap().push((method, uri, body.to_vec()));
                    (axum::http::StatusCode::OK, "ok")
                }
                Err(_) => (axum::http::StatusCode::BAD_REQUEST, "bad body"),
            }
        }
    })
}

/// Which server an exchange is with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Server {
    Gateway,
    Hyper,
}

/// What one server did with one input.
#[derive(Debug)]
pub(super) struct Outcome {
    pub(super) seen: Vec<Seen>,
    pub(super) reply: String,
    pub(super) closed: bool,
}

/// Sends `pieces` (with a short pause between them) to a fresh `server` on 127.0.0.1 and
/// reads until it closes or stays quiet.
pub(super) async fn exchange(server: Server, pieces: &[&[u8]], quiet: Duration) -> Outcome {
    let log = Arc::new(Mutex::new(Vec::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let router = recording(log.clone());
    let serving = tokio::spawn(async move {
        let (tcp, peer) = listener.accept().await.unwrap();
        match server {
            Server::Gateway => {
                let (_closing, closing_seen) = watch::channel(false);
                let slot = Arc::new(Semaphore::new(1)).try_acquire_owned().unwrap();
                super::server::serve_connection(tcp, peer, router, LIMITS, closing_seen, slot)
                    .await;
            }
            Server::Hyper => {
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        tower::ServiceExt::oneshot(router.clone(), req.map(Body::new))
                    });
                let io = hyper_util::rt::TokioIo::new(tcp);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            }
        }
    });
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if tcp.write_all(piece).await.is_err() {
            break;
        }
    }
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + quiet + Duration::from_secs(3);
    let closed = loop {
        if tokio::time::Instant::now() > deadline {
            break false;
        }
        match tokio::time::timeout(quiet, tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => reply.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    drop(tcp);
    let _ = tokio::time::timeout(Duration::from_secs(2), serving).await;
    let seen = std::mem::take(&mut *log.lock().unwrap());
    Outcome {
        seen,
        reply: String::from_utf8_lossy(&reply).into_owned(),
        closed,
    }
}

/// Why the gateway breaks the rule against hyper on `pieces`, if it does: exchanged with
/// both, and once more, patiently, before a disagreement is reported.
pub(super) async fn differs(pieces: &[&[u8]]) -> Option<String> {
    let gateway = exchange(Server::Gateway, pieces, QUIET).await;
    let hyper = exchange(Server::Hyper, pieces, QUIET).await;
    disagreement(&gateway, &hyper)?;
    let gateway = exchange(Server::Gateway, pieces, PATIENT).await;
    let hyper = exchange(Server::Hyper, pieces, PATIENT).await;
    disagreement(&gateway, &hyper)
}

/// Why the gateway's outcome breaks the rule against hyper's, if it does.
fn disagreement(gateway: &Outcome, hyper: &Outcome) -> Option<String> {
    if gateway.seen == hyper.seen {
        return None;
    }
    let prefix = gateway.seen.len() < hyper.seen.len()
        && hyper.seen[..gateway.seen.len()] == gateway.seen[..];
    let refused = gateway.closed && last_status(&gateway.reply).is_some_and(|s| s >= 400);
    if prefix && refused {
        return None;
    }
    Some(format!(
        "gateway acted on {:?} (closed: {}, last status {:?}); hyper on {:?}",
        shown(&gateway.seen),
        gateway.closed,
        last_status(&gateway.reply),
        shown(&hyper.seen)
    ))
}

fn shown(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .map(|(m, u, b)| format!("{m} {u} {:?}", String::from_utf8_lossy(b)))
        .collect()
}

/// The status of the last response in `reply`.
fn last_status(reply: &str) -> Option<u16> {
    let at = reply.rfind("HTTP/1.1 ")?;
    reply.get(at + 9..at + 12)?.parse().ok()
}

/// The corpus: `(name, bytes)` from `tests/http1/corpus.txt` (`\r`, `\n`, `\t`, `\\` and
/// `\xHH` escapes; `#` comments).
pub(super) fn corpus() -> Vec<(String, Vec<u8>)> {
    let text = include_str!("../../tests/http1/corpus.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|line| {
            let (name, escaped) = line.split_once('\t').expect("name<TAB>bytes");
            (name.to_owned(), unescape(escaped))
        })
        .collect()
}

fn unescape(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let (byte, used) = match bytes.get(i + 1) {
            Some(b'r') => (b'\r', 2),
            Some(b'n') => (b'\n', 2),
            Some(b't') => (b'\t', 2),
            Some(b'\\') => (b'\\', 2),
            Some(b'x') => {
                let hex = std::str::from_utf8(&bytes[i + 2..i + 4]).unwrap();
                (u8::from_str_radix(hex, 16).unwrap(), 4)
            }
            other => panic!("unknown escape {other:?} in {s:?}"),
        };
        out.push(byte);
        i += used;
    }
    out
}

/// Every corpus case, whole and split in three at fixed points, against both servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_never_draws_another_request_boundary_than_hyper() {
    let cases = corpus();
    assert!(cases.len() >= 200, "the corpus has {} cases", cases.len());
    // A bound on exchanges at once, so none is slow enough to look quiet.
    let at_once = Arc::new(Semaphore::new(32));
    let mut runs = Vec::new();
    for (name, bytes) in cases {
        for split in [false, true] {
            let name = name.clone();
            let bytes = bytes.clone();
            let at_once = at_once.clone();
            runs.push(tokio::spawn(async move {
                let _turn = at_once.acquire().await.unwrap();
                let pieces: Vec<&[u8]> = if split && bytes.len() > 3 {
                    let (a, b) = (bytes.len() / 3, 2 * bytes.len() / 3);
                    vec![&bytes[..a], &bytes[a..b], &bytes[b..]]
                } else {
                    vec![&bytes[..]]
                };
                let gateway = exchange(Server::Gateway, &pieces, QUIET).await;
                let hyper = exchange(Server::Hyper, &pieces, QUIET).await;
                let refused = gateway.seen.len() < hyper.seen.len();
                let verdict = match disagreement(&gateway, &hyper) {
                    Some(_) => differs(&pieces).await,
                    None => None,
                };
                let verdict = verdict
                    .map(|why| format!("{name}{}: {why}", if split { " (split)" } else { "" }));
                (verdict, refused)
            }));
        }
    }
    let (mut failures, mut stricter, mut total) = (Vec::new(), 0, 0);
    for run in runs {
        let (verdict, refused) = run.await.unwrap();
        total += 1;
        stricter += usize::from(refused);
        failures.extend(verdict);
    }
    println!("{total} exchanges, {stricter} where the gateway refused what hyper acted on");
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
