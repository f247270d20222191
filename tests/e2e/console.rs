//! The HITL review console (docs/design.md#3-http-surface,
//! docs/design.md#7-human-in-the-loop) in a real browser: Debian's Chromium driven by
//! playwright-core (`tests/browser/console.test.mjs`). A run leaves a task waiting for
//! approval; the reviewer opens `/console` (with inbound auth: the console asks for the key,
//! which the reviewer enters; without: it connects by itself), opens the waiting thread from
//! the inbox, answers through the generated form, and watches the resumed run stream to its
//! end. An agent the gateway cannot read is said to be unreachable, never an empty inbox.
//! The inbox is live (the change feed `GET /threads/events`): a new approval appears without
//! a reload, and after the gateway restarts the console reconnects and shows the same inbox.

use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::binary::Launch;
use crate::support::*;

const KEY: &str = "e2e-console-key-0123456789";

/// Runs the browser check with `args` (after `--gateway`); its report, asserted ok.
async fn browser(gateway: &str, args: &[&str]) -> Value {
    let script = root().join("tests/browser/console.test.mjs");
    assert!(
        root()
            .join("tests/browser/node_modules/playwright-core")
            .exists(),
        "playwright-core is missing: run `bash scripts/test` (it installs tests/browser)"
    );
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "Chromium is missing at /usr/bin/chromium: run `bash scripts/test` (apt-get install chromium)"
    );
    let out = tokio::process::Command::new("node")
        .arg(&script)
        .args(["--gateway", gateway])
        .args(args)
        .args([
            "--shots",
            &root().join("target/console-screenshots").to_string_lossy(),
        ])
        .output()
        .await
        .expect("run node");
    let report = driver_report(&out, "the browser test");
    assert!(
        out.status.success() && report["ok"] == true,
        "the console check failed: {report:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

/// Leaves an approval waiting on `thread` of the agent at `url` (its `approve` scenario): the
/// run ends in an interrupt.
async fn ask_approval(url: &str, thread: &str) {
    let ask = post_run(
        url,
        &run_input(thread, "approve"),
        std::time::Duration::from_secs(20),
    )
    .await;
    let outcome = &ask.events.last().expect("events")["outcome"]["type"];
    assert_eq!(outcome, "interrupt", "{}", ask.raw);
}

/// The reviewer saw the demo-style approval and the resumed run's answer.
fn assert_answered(report: &Value) {
    assert_eq!(report["question"], "Do you approve? Reply yes or no.");
    assert!(
        report["streamed"]
            .as_str()
            .unwrap()
            .contains("Approved: yes"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reviewer_answers_a_waiting_thread_in_the_console() {
    let upstream_url = upstream("both");
    let config = json!({
        "auth": {"api_keys": [{"name": "reviewer", "key": KEY}]},
        "agents": [{"name": "ref", "url": upstream_url}],
    });
    let gw = Gateway::start(&config.to_string(), false).await;

    // The open page needs no key; the API does.
    let page = reqwest::get(format!("{}/console", gw.base)).await.unwrap();
    assert_eq!(page.status(), 200);
    let unkeyed = reqwest::get(format!("{}/threads", gw.base)).await.unwrap();
    assert_eq!(unkeyed.status(), 401);

    // A pending approval on thread `console-approve`.
    let thread = "console-approve";
    let body = with(
        run_input(thread, "approve"),
        &json!({"protocolVersion": "1.0"}),
    );
    let ask = post_as(&gw.agent_url("ref"), KEY, &body).await;
    assert_eq!(ask.status(), 200);
    let events = sse_events(&ask.text().await.unwrap());
    let finished = events.last().expect("events");
    assert_eq!(finished["outcome"]["type"], "interrupt", "{finished}");
    let task_id = finished["outcome"]["interrupts"][0]["metadata"]["a2a"]["taskId"]
        .as_str()
        .expect("the interrupt's task")
        .to_owned();

    let report = browser(
        &gw.base,
        &[
            "--key",
            KEY,
            "--thread",
            thread,
            "--answer",
            "yes",
            "--expect",
            "Approved:",
            "--upstream",
            upstream_url,
        ],
    )
    .await;
    assert_eq!(report["clicked"], true, "{report}");
    assert_answered(&report);

    // The answer reached the agent: the same task completed upstream.
    let task = upstream_get_task(upstream_url, "1.0", &task_id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
}

#[tokio::test(flavor = "multi_thread")]
async fn on_an_open_gateway_the_console_connects_by_itself_and_names_an_unreachable_agent() {
    // No inbound auth; the demo agent waits for an approval, `offline` cannot be reached.
    let config = json!({"agents": [{"name": "offline", "url": closed_url()}]});
    let gw = Gateway::start(&config.to_string(), true).await;
    let thread = "console-open";
    ask_approval(&gw.agent_url("demo"), thread).await;

    let report = browser(&gw.base, &["--thread", thread, "--unreachable", "offline"]).await;
    assert_eq!(report["clicked"], false, "no click: {report}");
    for seen in ["inboxUnreachable", "listUnreachable"] {
        assert!(
            report[seen]
                .as_str()
                .unwrap_or_default()
                .contains("Agent offline could not be reached"),
            "{seen}: {report}"
        );
    }
    assert_answered(&report);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_inbox_is_live_and_reconnects_after_the_gateway_restarts() {
    // No inbound auth (every context visible) and threadId = contextId, so that the restarted
    // gateway, whose memory store starts empty, still names the same threads. An upstream of
    // its own: the inbox holds this test's threads only.
    let own = Upstream::start("both");
    let upstream_url = own.url.as_str();
    let config = json!({
        "agents": [{"name": "ref", "url": upstream_url, "context_ids": "client"}],
    });
    let config = config.to_string();
    let launch = Launch {
        config: &config,
        ..Launch::default()
    };
    let mut gw = launch.start("console").await.ready().await;

    let thread = "console-live-first";
    ask_approval(&format!("{}/agents/ref", gw.base), thread).await;

    // The browser: the feed followed (never a poll), a second approval shown without a
    // reload, then "RESTART": the gateway is restarted on the same port, and "RESTARTED".
    let mut node = tokio::process::Command::new("node")
        .arg(root().join("tests/browser/console.test.mjs"))
        .args(["--gateway", &gw.base, "--thread", thread, "--feed"])
        .args([
            "--new-approval",
            "ref",
            "--restart",
            "--upstream",
            upstream_url,
        ])
        .args([
            "--shots",
            &root().join("target/console-screenshots").to_string_lossy(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node");
    let mut stdin = node.stdin.take().unwrap();
    let mut lines = BufReader::new(node.stdout.take().unwrap()).lines();
    let mut stdout = String::new();
    let mut restarted = false;
    while let Some(line) =
        tokio::time::timeout(std::time::Duration::from_secs(120), lines.next_line())
            .await
            .expect("the browser test hung")
            .unwrap()
    {
        if line.trim() == "RESTART" {
            // Where the console expects it: the address the first one bound.
            let addr = gw.addr().to_owned();
            gw.stop().await;
            let launch = Launch {
                config: &config,
                listen: &addr,
                ..Launch::default()
            };
            gw = launch.start("console").await.ready().await;
            stdin.write_all(b"RESTARTED\n").await.unwrap();
            stdin.flush().await.unwrap();
            restarted = true;
        }
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let out = node.wait_with_output().await.expect("the browser test");
    let report = driver_report(
        &std::process::Output {
            status: out.status,
            stdout: stdout.into_bytes(),
            stderr: out.stderr.clone(),
        },
        "the browser test",
    );
    assert!(
        out.status.success() && report["ok"] == true,
        "the console check failed: {report:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        restarted,
        "the browser test never asked for the restart: {report}"
    );
    assert_eq!(report["mode"], "feed", "{report}");
    assert_eq!(report["polls"], 0, "{report}");
    let live = report["liveApproval"]["thread"]
        .as_str()
        .expect("a live approval");
    let after: Vec<&str> = report["reconnected"]["threads"]
        .as_array()
        .expect("the inbox after the restart")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(after.contains(&thread) && after.contains(&live), "{report}");
    assert_answered(&report);
    gw.stop().await;
}
