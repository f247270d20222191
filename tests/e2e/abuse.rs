//! Abusive clients (issue 5, docs/design.md#2-running-it-and-configuration
//! `limits`/`timeouts`, §9): slow heads, stalled bodies, clients that never read, oversize
//! state and ids, too many connections, and a memory test of the release of what a burst of
//! abuse costs. Raw sockets where HTTP clients would be too polite.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::binary::demo_binary;
use crate::fake::{artifact, task, update, update_with_data, Answer, Fake};
use crate::support::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn host(gw: &Gateway) -> &str {
    gw.base.trim_start_matches("http://")
}

async fn connect(gw: &Gateway) -> TcpStream {
    TcpStream::connect(host(gw)).await.expect("connect")
}

/// How a read of a raw connection ended.
struct ReadEnd {
    bytes: Vec<u8>,
    /// When the server closed (EOF or reset), from the start of the read; `None` if it was
    /// still open at the deadline.
    closed_after: Option<Duration>,
}

/// Reads until the server closes the connection or `within` passes.
async fn read_until_closed(s: &mut TcpStream, within: Duration) -> ReadEnd {
    let started = Instant::now();
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let left = within.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Err(_) => {
                return ReadEnd {
                    bytes,
                    closed_after: None,
                }
            }
            Ok(Ok(0)) | Ok(Err(_)) => {
                return ReadEnd {
                    bytes,
                    closed_after: Some(started.elapsed()),
                }
            }
            Ok(Ok(n)) => bytes.extend_from_slice(&buf[..n]),
        }
    }
}

/// A raw HTTP/1.1 response: status, lower-cased headers, body (de-chunked).
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Parses one complete response from `bytes`, `None` if it is not complete yet.
fn parse_response(bytes: &[u8]) -> Option<(RawResponse, usize)> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&bytes[..head_end]);
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let rest = &bytes[head_end..];
    let (body, used) = if let Some(len) = header("content-length") {
        let len: usize = len.parse().ok()?;
        (rest.get(..len)?.to_vec(), len)
    } else if header("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        let (mut body, mut at) = (Vec::new(), 0);
        loop {
            let line_end = rest[at..].windows(2).position(|w| w == b"\r\n")? + at;
            let size_hex = String::from_utf8_lossy(&rest[at..line_end]);
            let size = usize::from_str_radix(size_hex.split(';').next()?.trim(), 16).ok()?;
            at = line_end + 2;
            if size == 0 {
                at += 2;
                break;
            }
            body.extend_from_slice(rest.get(at..at + size)?);
            at += size + 2;
        }
        (body, at)
    } else {
        (Vec::new(), 0)
    };
    Some((
        RawResponse {
            status,
            headers,
            body,
        },
        head_end + used,
    ))
}

/// Reads one whole response on a kept-alive connection.
async fn read_response(s: &mut TcpStream, within: Duration) -> RawResponse {
    let started = Instant::now();
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if let Some((resp, _)) = parse_response(&bytes) {
            return resp;
        }
        let left = within.saturating_sub(started.elapsed());
        let n = tokio::time::timeout(left, s.read(&mut buf))
            .await
            .expect("a response in time")
            .expect("read");
        assert!(
            n > 0,
            "closed mid-response: {}",
            String::from_utf8_lossy(&bytes)
        );
        bytes.extend_from_slice(&buf[..n]);
    }
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

/// A gateway with the demo agent and these `limits`/`timeouts`.
async fn demo_gateway(config: Value) -> Gateway {
    Gateway::start(&config.to_string(), true).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_request_head_and_an_idle_keep_alive_are_closed_after_header_read() {
    let gw = demo_gateway(json!({"timeouts": {"header_read": 1000}})).await;

    // A request head that never ends.
    let mut slow = connect(&gw).await;
    slow.write_all(b"POST /agents/demo HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let end = read_until_closed(&mut slow, ms(4000)).await;
    let closed = end
        .closed_after
        .expect("a head still incomplete after header_read is closed");
    assert!(closed >= ms(500) && closed <= ms(3500), "{closed:?}");
    let said = String::from_utf8_lossy(&end.bytes);
    assert!(
        said.starts_with("HTTP/1.1 408") && said.contains("\"code\":\"head_timeout\""),
        "a 408 head_timeout: {said}"
    );

    // A kept-alive connection that sends nothing after its first request.
    let mut idle = connect(&gw).await;
    idle.write_all(HEALTHZ).await.unwrap();
    assert_eq!(read_response(&mut idle, ms(2000)).await.status, 200);
    let end = read_until_closed(&mut idle, ms(4000)).await;
    let closed = end
        .closed_after
        .expect("an idle keep-alive connection is closed after header_read");
    assert!(closed >= ms(500) && closed <= ms(3500), "{closed:?}");

    assert_serves(&gw, "slow-head-after").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_body_gets_408_body_timeout() {
    let gw = demo_gateway(json!({"timeouts": {"header_read": 5000, "body_read": 1000}})).await;
    let mut s = connect(&gw).await;
    s.write_all(
        b"POST /agents/demo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
          Content-Length: 100000\r\n\r\n{\"threadId",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let end = read_until_closed(&mut s, ms(5000)).await;
    let (resp, _) = parse_response(&end.bytes).unwrap_or_else(|| {
        panic!(
            "a complete 408 response within body_read (+slack), got {:?} after {:?}: {}",
            end.closed_after,
            started.elapsed(),
            String::from_utf8_lossy(&end.bytes)
        )
    });
    assert!(started.elapsed() < ms(4500), "{:?}", started.elapsed());
    assert_eq!(resp.status, 408, "{}", String::from_utf8_lossy(&resp.body));
    let ctype = resp
        .headers
        .iter()
        .find(|(n, _)| n == "content-type")
        .map(|(_, v)| v.as_str());
    assert!(
        ctype.is_some_and(|c| c.starts_with("application/json")),
        "{ctype:?}"
    );
    let body: Value = serde_json::from_slice(&resp.body).expect("a JSON error");
    assert_eq!(body["error"]["code"], "body_timeout", "{body}");
    assert_serves(&gw, "stalled-body-after").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_stops_reading_is_cut_and_its_run_slot_freed() {
    let client_write = 1000;
    let config = json!({
        "limits": {"max_concurrent_runs": 1, "max_text_bytes_per_run": 1u64 << 40,
            "max_events_per_run": 100_000_000},
        "timeouts": {"client_write": client_write, "run": 60000, "idle": 60000},
    });
    let gw = demo_gateway(config).await;
    // About 3 GB of output (at 1,000 events a second, so that the demo task, which a
    // disconnect does not cancel, stays cheap for the rest of the suite) to a client with
    // a tiny receive buffer that never reads it.
    let body = run_input("never-reads", "bench 200000 16384 1000").to_string();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket
        .connect(host(&gw).parse().unwrap())
        .await
        .expect("connect");
    let request = format!(
        "POST /agents/demo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stalled.write_all(request.as_bytes()).await.unwrap();
    let started = Instant::now();

    let client = reqwest::Client::new();
    let echo = run_input("second", "echo second run");
    // The first run holds the only slot while it streams.
    wait_until(
        "the stalled client's run streams",
        ms(5000),
        async || match open_streams(&gw, "demo").await {
            0 => Err("no open stream".to_owned()),
            _ => Ok(()),
        },
    )
    .await;
    let busy = client
        .post(gw.agent_url("demo"))
        .json(&echo)
        .send()
        .await
        .unwrap();
    assert_eq!(
        busy.status(),
        429,
        "the stalled run holds the only run slot"
    );
    let err: Value = busy.json().await.unwrap();
    assert_eq!(err["error"]["code"], "too_many_runs");

    // Once the gateway has been unable to write for client_write, the slot is free again.
    let deadline = ms(client_write + 7000);
    let mut last = 429;
    while started.elapsed() < deadline {
        let resp = client
            .post(gw.agent_url("demo"))
            .json(&echo)
            .send()
            .await
            .unwrap();
        last = resp.status().as_u16();
        if last == 200 {
            let text = resp.text().await.unwrap();
            assert!(text.contains("RUN_FINISHED"), "{}", tail(&text, 400));
            break;
        }
        assert_eq!(last, 429);
        tokio::time::sleep(ms(200)).await;
    }
    assert_eq!(
        last,
        200,
        "still no free run slot {:?} after the client stopped reading",
        started.elapsed()
    );
    assert!(
        started.elapsed() >= ms(client_write / 2),
        "the slot was freed before client_write: {:?}",
        started.elapsed()
    );
    drop(stalled);
    assert_serves(&gw, "never-reads-after").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oversize_state_and_long_ids_are_refused_before_the_stream() {
    let (max_state, max_id) = (4096usize, 64usize);
    let gw =
        demo_gateway(json!({"limits": {"max_state_bytes": max_state, "max_id_bytes": max_id}}))
            .await;
    let url = gw.agent_url("demo");
    // A state whose serialization is `{"blob":"xxx..."}`: `overhead` bytes plus the string.
    let with_state = |thread: &str, size: usize| {
        let overhead = json!({"blob": ""}).to_string().len();
        let mut body = run_input(thread, "echo ok");
        body["state"] = json!({"blob": "x".repeat(size - overhead)});
        assert_eq!(body["state"].to_string().len(), size);
        body
    };
    let within = Duration::from_secs(10);

    let fits = post_run(&url, &with_state("state-fits", max_state - 16), within).await;
    assert_run_finished(&fits);
    let over = post_run(&url, &with_state("state-over", max_state + 1), within).await;
    assert_eq!(over.status, 413, "{}", over.raw);
    assert_eq!(over.json()["error"]["code"], "state_too_large");

    let id_ok = "i".repeat(max_id);
    let id_long = "i".repeat(max_id + 1);
    let mut ok = run_input("ids-ok", "echo ok");
    ok["threadId"] = json!(id_ok);
    ok["runId"] = json!(id_ok);
    ok["messages"][0]["id"] = json!(id_ok);
    assert_run_finished(&post_run(&url, &ok, within).await);
    for field in ["/threadId", "/runId", "/messages/0/id"] {
        let mut body = run_input("ids-long", "echo ok");
        *body.pointer_mut(field).unwrap() = json!(id_long);
        let run = post_run(&url, &body, within).await;
        assert_eq!(run.status, 422, "{field}: {}", run.raw);
        let err = run.json();
        assert_eq!(err["error"]["code"], "id_too_long", "{field}: {err}");
        assert!(
            !run.raw.contains(&id_long),
            "{field}: the id is not echoed whole"
        );
    }
    assert_serves(&gw, "limits-after").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_beyond_max_connections_are_closed_at_once() {
    let gw = demo_gateway(json!({
        "limits": {"max_connections": 4},
        "timeouts": {"header_read": 30000},
    }))
    .await;
    // Four kept-alive connections, each having been served once.
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut c = connect(&gw).await;
        c.write_all(HEALTHZ).await.unwrap();
        assert_eq!(read_response(&mut c, ms(2000)).await.status, 200);
        held.push(c);
    }
    // A fifth is closed without an answer.
    let mut fifth = connect(&gw).await;
    let _ = fifth.write_all(HEALTHZ).await;
    let end = read_until_closed(&mut fifth, ms(2000)).await;
    assert!(
        end.closed_after.is_some(),
        "the fifth connection is closed promptly"
    );
    assert!(
        end.bytes.is_empty(),
        "no answer on the fifth: {}",
        String::from_utf8_lossy(&end.bytes)
    );
    // The held ones still work.
    held[0].write_all(HEALTHZ).await.unwrap();
    assert_eq!(read_response(&mut held[0], ms(2000)).await.status, 200);

    drop(held);
    let mut served = false;
    for _ in 0..20 {
        tokio::time::sleep(ms(100)).await;
        let mut c = connect(&gw).await;
        let _ = c.write_all(HEALTHZ).await;
        let end = read_until_closed(&mut c, ms(1000)).await;
        if end.bytes.starts_with(b"HTTP/1.1 200") {
            served = true;
            break;
        }
    }
    assert!(served, "new connections are served once the four are gone");
    assert_serves(&gw, "connections-after").await;
}

// The memory test: the release binary's RSS after a burst of abuse.

/// `VmRSS` (or another `Vm*` line) of process `pid`, in KiB.
fn vm_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("procfs");
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// The hostile upstream of the memory test, scripted by the user's message.
async fn hostile_by_message() -> Fake {
    Fake::start_responder(|method, params| {
        if method != "SendStreamingMessage" {
            return None;
        }
        let text = params["message"]["parts"][0]["text"].as_str().unwrap_or("");
        let frames = match text {
            "deep" => vec![
                task("TASK_STATE_WORKING", None),
                artifact("r", "deep", json!({"path": "/a".repeat(20_000)})),
                update("TASK_STATE_COMPLETED", None),
            ],
            "bomb" => {
                let patch: Vec<Value> = (0..22)
                    .map(|n| json!({"op": "copy", "from": "", "path": format!("/k{n}")}))
                    .collect();
                vec![
                    task("TASK_STATE_WORKING", None),
                    update_with_data(
                        "TASK_STATE_WORKING",
                        "m-bomb",
                        json!({"type": "agui-state-delta", "patch": patch}),
                    ),
                    update("TASK_STATE_COMPLETED", None),
                ]
            }
            "text" => {
                return Some(Answer::Generated(std::sync::Arc::new(|i: usize| match i {
                    0 => Some(task("TASK_STATE_WORKING", None)),
                    1..=200 => {
                        let letter = char::from(b'a' + (i % 26) as u8);
                        let text = letter.to_string().repeat(256 * 1024);
                        Some(update("TASK_STATE_WORKING", Some(("m-text", &text))))
                    }
                    _ => None,
                })))
            }
            _ => return None,
        };
        Some(Answer::Frames(frames))
    })
    .await
}

/// The end of a run, read without keeping its body (the burst's client stays light).
struct Outcome {
    status: u16,
    /// The last SSE event (or the JSON error).
    last: Value,
    tail: String,
    elapsed: Duration,
}

async fn outcome(url: &str, body: &Value, within: Duration) -> Outcome {
    let started = Instant::now();
    let read = async {
        let mut resp = reqwest::Client::new()
            .post(url)
            .json(body)
            .send()
            .await
            .expect("send");
        let status = resp.status().as_u16();
        let mut kept: Vec<u8> = Vec::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            kept.extend_from_slice(&chunk);
            if kept.len() > 1 << 17 {
                kept.drain(..kept.len() - (1 << 16));
            }
        }
        (status, String::from_utf8_lossy(&kept).into_owned())
    };
    let (status, tail) = tokio::time::timeout(within, read)
        .await
        .unwrap_or_else(|_| panic!("a run did not end within {within:?}"));
    let last = tail
        .trim_end()
        .rsplit("\n\n")
        .next()
        .and_then(|frame| frame.trim_start().strip_prefix("data: "))
        .and_then(|data| serde_json::from_str(data).ok())
        .unwrap_or_default();
    Outcome {
        status,
        last,
        tail: crate::support::tail(&tail, 400).to_owned(),
        elapsed: started.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_returns_near_its_start_after_a_burst_of_abuse() {
    let up = hostile_by_message().await;
    let max_state = 1usize << 20;
    // The text limit is 1 MiB here (256 KiB chunks), not the 4 MiB of the endless-text test:
    // the binary under test is the debug build, and 80 runs of 4 MiB take most of a minute.
    let config = json!({
        "agents": [{"name": "hostile", "url": up.url}],
        "limits": {"max_state_bytes": max_state, "max_state_depth": 32,
            "max_text_bytes_per_run": 1 << 20},
        "timeouts": {"upstream_call": 2000},
    });
    let mut gw = demo_binary(&config, "abuse-memory").await;
    let within = Duration::from_secs(30);
    let demo = format!("{}/agents/demo", gw.base);
    let hostile = format!("{}/agents/hostile", gw.base);

    for i in 0..5 {
        let mut body = run_input(&format!("warm-{i}"), "echo warming up");
        body["state"] = json!({"notes": "n".repeat(64 * 1024)});
        assert_run_finished(&post_run(&demo, &body, within).await);
    }
    // Kept as a time: the warm-up's freed memory goes back over the allocator's decay, a
    // matter of time with no event to wait for; the baseline is read after a settling second.
    tokio::time::sleep(ms(1000)).await;
    let start = vm_kib(gw.pid(), "VmRSS");

    // 20 rounds of four abuses, eight runs at a time.
    let big_state = json!({"blob": "s".repeat(max_state - 64)});
    let mut runs = Vec::new();
    for round in 0..20 {
        let mut state_run = run_input(&format!("big-state-{round}"), "echo big state");
        state_run["state"] = big_state.clone();
        runs.push((demo.clone(), state_run, None));
        for kind in ["deep", "bomb", "text"] {
            let body = run_input(&format!("{kind}-{round}"), kind);
            runs.push((hostile.clone(), body, Some("limit_exceeded")));
        }
    }
    use futures::StreamExt;
    let outcomes: Vec<(String, Outcome, Option<&str>)> = futures::stream::iter(runs)
        .map(|(url, body, code)| async move {
            let thread = body["threadId"].as_str().unwrap().to_owned();
            (thread, outcome(&url, &body, within).await, code)
        })
        .buffer_unordered(8)
        .collect()
        .await;
    gw.assert_alive();
    for (thread, run, code) in &outcomes {
        let last = &run.last;
        let as_expected = match code {
            Some(code) => last["type"] == "RUN_ERROR" && last["code"] == *code,
            None => last["type"] == "RUN_FINISHED",
        };
        assert!(
            run.status == 200 && as_expected,
            "{thread}: expected {code:?}, got {}: {}",
            run.status,
            run.tail
        );
    }
    for kind in ["big-state", "deep", "bomb", "text"] {
        let times: Vec<Duration> = outcomes
            .iter()
            .filter(|(t, ..)| t.starts_with(&format!("{kind}-")))
            .map(|(_, run, _)| run.elapsed)
            .collect();
        println!(
            "{kind}: {} runs, slowest {:?}",
            times.len(),
            times.iter().max().unwrap()
        );
    }
    let peak = vm_kib(gw.pid(), "VmHWM");
    // What a burst freed goes back to the system over the allocator's decay (about ten
    // seconds for jemalloc): wait for RSS to come back near its warm start.
    let margin = 8 * 1024;
    let freed = Instant::now();
    let mut end = vm_kib(gw.pid(), "VmRSS");
    while end > start + margin && freed.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(ms(500)).await;
        end = vm_kib(gw.pid(), "VmRSS");
    }
    println!(
        "gateway RSS: {start} KiB warm, peak {peak} KiB during {} abusive runs, \
         {end} KiB {:?} after",
        outcomes.len(),
        freed.elapsed()
    );
    assert!(
        end <= start + margin,
        "RSS did not return near its start: {start} KiB -> {end} KiB (peak {peak} KiB)"
    );
    assert_run_finished(
        &post_run(&demo, &run_input("memory-after", "echo still here"), within).await,
    );
    gw.assert_alive();
}
