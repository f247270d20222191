//! Fuzz targets for what reads bytes from peers (issue 18; docs/security.md "Fuzzing"):
//! the head boundary, the chunked decoder, the upstream SSE reader, a run's `Accept` (the
//! stream's encoding), and the inbound server differentially against hyper's
//! ([`super::differential_tests`]).
//!
//! Property-based on stable Rust (`proptest`): inputs are built from the grammar's pieces
//! (digits, CR, LF, `;`, quotes, whitespace of every kind, header lines, pipelined requests)
//! and mutated. Each target checks a property that holds for every input: the same result
//! however the bytes are split across reads, the head's end where `httparse` puts it, bounded
//! leftovers, and the differential rule against hyper. Without `FUZZ_SECONDS` each runs a
//! short seeded pass (the test suite); `scripts/fuzz SECONDS` runs every target for that
//! long with fresh seeds.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use super::differential_tests::differs;
use crate::a2a::sse::{Parser, SseError};
use crate::http1::{self, Framing, FramingError};

/// Runs `test` on `cases` inputs of `strategy` (a fixed seed), or, with `FUZZ_SECONDS` set,
/// on fresh seeds until that time has passed. Prints how many inputs it tried.
fn fuzz<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let seconds = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok());
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs(s));
    let (mut total, mut round) = (0u64, 0u64);
    loop {
        let seed: [u8; 32] = match deadline {
            None => [7; 32],
            Some(_) => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos();
                let mut seed = [0; 32];
                seed[..16].copy_from_slice(&nanos.to_le_bytes());
                seed[16..24].copy_from_slice(&round.to_le_bytes());
                seed
            }
        };
        let config = Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        };
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
        let mut runner = TestRunner::new_with_rng(config, rng);
        if let Err(e) = runner.run(&strategy, &test) {
            panic!("fuzz {name} (seed {seed:?}): {e}");
        }
        total += u64::from(cases);
        round += 1;
        if deadline.is_none_or(|d| Instant::now() >= d) {
            break;
        }
    }
    println!("fuzz {name}: {total} inputs, no failure");
}

/// Bytes built from framing's pieces: most inputs come near the grammar's edges.
fn framing_bytes(pieces: &'static [&'static [u8]], max: usize) -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        8 => proptest::sample::select(pieces).prop_map(<[u8]>::to_vec),
        1 => any::<u8>().prop_map(|b| vec![b]),
    ];
    proptest::collection::vec(piece, 0..max).prop_map(|p| p.concat())
}

const CHUNKED_PIECES: &[&[u8]] = &[
    b"0",
    b"1",
    b"5",
    b"a",
    b"F",
    b"10",
    b"\r\n",
    b"\r\n",
    b"\r\n",
    b"\r",
    b"\n",
    b";",
    b"=",
    b"\"",
    b"\\",
    b"x",
    b"hello",
    b" ",
    b"\t",
    b"\x0b",
    b"\x0c",
    b":",
    b"X: 1",
    b"\xc2\xa0",
    b"+",
    b"-",
    b"0x",
    b"5\r\nhello\r\n",
    b"0\r\n\r\n",
    b";a=b",
    b"\x00",
];

/// Decodes `input` split at `cuts`: the payload, whether the body ended, and the error.
fn decode_split(input: &[u8], cuts: &[usize]) -> (Vec<u8>, bool, Option<FramingError>, usize) {
    let mut framing = Framing::chunked();
    let (mut pending, mut payload, mut most_pending) = (Vec::new(), Vec::new(), 0);
    let mut last = 0;
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    ends.sort_unstable();
    ends.push(input.len());
    for end in ends {
        pending.extend_from_slice(&input[last..end.max(last)]);
        last = end.max(last);
        match http1::decode(&mut framing, &pending, &mut payload) {
            Ok(used) => {
                pending.drain(..used);
                most_pending = most_pending.max(pending.len());
            }
            Err(e) => return (payload, false, Some(e), most_pending),
        }
        if framing.ended() {
            break;
        }
    }
    (payload, framing.ended(), None, most_pending)
}

#[test]
fn fuzz_chunked_decoding_is_the_same_however_it_is_split() {
    let input = (
        framing_bytes(CHUNKED_PIECES, 48),
        proptest::collection::vec(any::<usize>(), 0..6),
    );
    fuzz("chunked", 3000, input, |(bytes, cuts)| {
        let whole = decode_split(&bytes, &[]);
        let split = decode_split(&bytes, &cuts);
        prop_assert_eq!(&whole.0, &split.0);
        prop_assert_eq!(whole.1, split.1);
        prop_assert_eq!(whole.2.is_some(), split.2.is_some());
        // Never more left undecoded than a line's or the trailers' bound.
        let bound = http1::MAX_CHUNK_LINE.max(http1::MAX_TRAILER_BYTES) + 2;
        prop_assert!(split.3 <= bound);
        Ok(())
    });
}

const HEAD_PIECES: &[&[u8]] = &[
    b"GET / HTTP/1.1",
    b"POST /a HTTP/1.1",
    b"\r\n",
    b"\r\n",
    b"\r\n",
    b"\n",
    b"\r",
    b"Host: x",
    b"Content-Length: 5",
    b"Transfer-Encoding: chunked",
    b": ",
    b" ",
    b"\t",
    b"X",
    b"\x00",
    b"\x7f",
    b"\xff",
    b"GET",
    b"HTTP/1.0",
];

#[test]
fn fuzz_a_head_ends_where_httparse_ends_it() {
    let input = (framing_bytes(HEAD_PIECES, 24), 1usize..8);
    fuzz("head", 3000, input, |(bytes, step)| {
        let bytes = [&b"GET / HTTP/1.1\r\n"[..], &bytes].concat();
        let mut searched = 0;
        let mut found = None;
        for end in (step..bytes.len() + step).step_by(step) {
            found = http1::find_head(&bytes[..end.min(bytes.len())], &mut searched).unwrap();
            if found.is_some() {
                break;
            }
        }
        let mut slots = [httparse::EMPTY_HEADER; http1::MAX_HEADERS];
        if let Ok(httparse::Status::Complete(len)) =
            httparse::Request::new(&mut slots).parse(&bytes)
        {
            prop_assert_eq!(found, Some(len));
        }
        if let Some(len) = found {
            let parsed = super::server::parse_head(&bytes[..len]);
            if parsed.is_ok() {
                prop_assert!(http1::check_line_endings(&bytes[..len]).is_ok());
            }
        }
        Ok(())
    });
}

const SSE_PIECES: &[&[u8]] = &[
    b"data: ",
    b"data:",
    b"event: error",
    b": ping",
    b"id: 1",
    b"retry: 5",
    b"\n",
    b"\n",
    b"\r\n",
    b"\r",
    b"{\"a\":1}",
    b"x",
    b"\xff",
    b"\xc3",
    b"\xa9",
    b" ",
];

/// An SSE event's type and data.
type Sse = (Option<String>, String);

/// Frames of `input` split at `cuts` (and the stream's end).
fn sse_split(input: &[u8], cuts: &[usize], limit: usize) -> Vec<Result<Sse, SseError>> {
    let mut parser = Parser::new(limit);
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    ends.sort_unstable();
    ends.push(input.len());
    let (mut out, mut last) = (Vec::new(), 0);
    for end in ends {
        parser.push(&input[last..end.max(last)]);
        last = end.max(last);
        loop {
            match parser.next_frame() {
                Ok(Some(frame)) => out.push(Ok((frame.event, frame.data))),
                Ok(None) => break,
                Err(e) => {
                    out.push(Err(e));
                    return out;
                }
            }
        }
    }
    out
}

#[test]
fn fuzz_the_sse_reader_is_the_same_however_it_is_split() {
    let input = (
        framing_bytes(SSE_PIECES, 40),
        proptest::collection::vec(any::<usize>(), 0..6),
        16usize..256,
    );
    fuzz("sse", 3000, input, |(bytes, cuts, limit)| {
        let whole = sse_split(&bytes, &[], limit);
        let split = sse_split(&bytes, &cuts, limit);
        // A split may find an over-long event before its end arrives; otherwise the same.
        let cut_short = |frames: &[Result<Sse, SseError>]| {
            frames
                .iter()
                .position(|f| f.is_err())
                .unwrap_or(frames.len())
        };
        let n = cut_short(&whole).min(cut_short(&split));
        prop_assert_eq!(&whole[..n], &split[..n]);
        for (_, data) in whole.iter().chain(&split).flatten() {
            prop_assert!(data.len() <= limit);
        }
        Ok(())
    });
}

/// Pieces of `Accept` headers: media ranges, parameters, q-values good and bad, separators.
const ACCEPT_PIECES: &[&[u8]] = &[
    b"application/vnd.ag-ui.event+proto",
    b"APPLICATION/VND.AG-UI.EVENT+PROTO",
    b"text/event-stream",
    b"text/*",
    b"*/*",
    b"application/json",
    b";",
    b",",
    b"=",
    b" ",
    b"\t",
    b"q",
    b"Q",
    b"q=",
    b"0",
    b"1",
    b"0.5",
    b"1.0001",
    b"-0",
    b"NaN",
    b"inf",
    b"1e-3",
    b"\"",
    b"\xff",
];

#[test]
fn fuzz_an_accept_header_chooses_protobuf_only_by_name() {
    use super::encoding::Encoding;
    fuzz("accept", 3000, framing_bytes(ACCEPT_PIECES, 24), |bytes| {
        let Ok(value) = axum::http::HeaderValue::from_bytes(&bytes) else {
            return Ok(());
        };
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(axum::http::header::ACCEPT, value);
        let chosen = Encoding::negotiate(&headers, true);
        let named = String::from_utf8_lossy(&bytes)
            .to_ascii_lowercase()
            .contains("application/vnd.ag-ui.event+proto");
        prop_assert!(chosen == Encoding::Sse || named);
        Ok(())
    });
}

/// One request of the differential target: a start line, headers, a body, each with the
/// grammar's variants, every line ending CRLF or (rarely) not.
fn request() -> impl Strategy<Value = Vec<u8>> {
    let line_end =
        prop_oneof![12 => Just(&b"\r\n"[..]), 1 => Just(&b"\n"[..]), 1 => Just(&b"\r"[..])];
    const STARTS: &[&[u8]] = &[
        b"POST /echo HTTP/1.1",
        b"GET /a HTTP/1.1",
        b"POST /b HTTP/1.0",
        b"post /a HTTP/1.1",
    ];
    const HEADERS: &[&[u8]] = &[
        b"Host: x",
        b"Content-Length: 5",
        b"Content-Length: 0",
        b"Content-Length: 5, 5",
        b"Content-Length:5",
        b"Content-Length: +5",
        b"Transfer-Encoding: chunked",
        b"Transfer-Encoding: Chunked",
        b"Transfer-Encoding: chunked,",
        b"Transfer-Encoding: gzip, chunked",
        b"Transfer-Encoding: chunked, identity",
        b"Transfer-Encoding:\tchunked",
        b"Transfer-Encoding : chunked",
        b"Connection: close",
        b"Expect: 100-continue",
        b"X: y",
        b" folded",
        b"X-A\x00: b",
    ];
    let start = proptest::sample::select(STARTS);
    let header = proptest::sample::select(HEADERS);
    let body = framing_bytes(CHUNKED_PIECES, 12);
    (
        start,
        proptest::collection::vec((header, line_end.clone()), 0..4),
        line_end.clone(),
        line_end,
        body,
    )
        .prop_map(|(start, headers, first_end, head_end, body)| {
            let mut out = start.to_vec();
            out.extend_from_slice(first_end);
            for (h, end) in headers {
                out.extend_from_slice(h);
                out.extend_from_slice(end);
            }
            out.extend_from_slice(head_end);
            out.extend_from_slice(&body);
            out
        })
}

#[test]
fn fuzz_generated_requests_get_the_same_boundary_as_hyper() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // A case is 16 inputs, each up to three pipelined requests, exchanged concurrently.
    let input = proptest::collection::vec(proptest::collection::vec(request(), 1..4), 16);
    fuzz("differential", 6, input, |batch| {
        let verdicts = runtime.block_on(async {
            let runs = batch.into_iter().map(|requests| async move {
                let bytes = requests.concat();
                differs(&[&bytes])
                    .await
                    .map(|why| format!("{:?}: {why}", String::from_utf8_lossy(&bytes)))
            });
            futures::future::join_all(runs).await
        });
        let failures: Vec<String> = verdicts.into_iter().flatten().collect();
        prop_assert!(failures.is_empty(), "{}", failures.join("\n"));
        Ok(())
    });
}
