//! A CopilotKit React app (`@copilotkit/react-core` 1.74, v2 API: `CopilotKit`,
//! `CopilotChat`, `useAgent`, `useCapabilities`; `tests/react/`) in Debian's Chromium, served
//! from its own origin and pointed at the gateway's CopilotKit routes by `runtimeUrl`, as a
//! deployed app is: the gateway allows that origin (`cors_origins`). The driver
//! (`tests/react/app.test.mjs`) types into CopilotKit's chat, reloads, and reports what the
//! chat rendered, what `useCapabilities` returned, the AG-UI events the agent received, the
//! requests the page sent, and every console error. Most tests talk to the demo agent; the
//! reasoning test to the real ADK peer with its scripted thinking model (`frameworks.rs`).

use std::time::Instant;

use serde_json::{json, Value};
use tokio::sync::OnceCell;

use crate::support::*;

const KEY: &str = "react-app-key-0123456789";

/// The app's bundle (`tests/react/build.mjs`): built once per test process, kept under
/// `target/react-app` keyed by its sources, so an unchanged app is not bundled again.
async fn bundle() -> &'static str {
    static APP: OnceCell<String> = OnceCell::const_new();
    APP.get_or_init(|| async {
        let dir = root().join("tests/react");
        require(
            &dir.join("node_modules/@copilotkit/react-core"),
            "@copilotkit/react-core",
        );
        require(
            &root().join("tests/browser/node_modules/playwright-core"),
            "playwright-core",
        );
        let out = tokio::process::Command::new("node")
            .arg(dir.join("build.mjs"))
            .arg("--cache")
            .arg(root().join("target/react-app"))
            .output()
            .await
            .expect("run node");
        assert!(
            out.status.success(),
            "bundling the app failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let built: Value = serde_json::from_slice(&out.stdout).expect("build.mjs's report");
        eprintln!("react app bundle: {built}");
        built["out"].as_str().unwrap().to_owned()
    })
    .await
}

/// A gateway running the demo agent (and `extra` config), allowing the page's origin
/// `http://127.0.0.1:{port}`.
async fn gateway(port: u16, extra: Value) -> Gateway {
    gateway_with(port, extra, true).await
}

/// A gateway with `extra` config (and the demo agent when `demo`), allowing the page's origin
/// `http://127.0.0.1:{port}`.
async fn gateway_with(port: u16, extra: Value, demo: bool) -> Gateway {
    let mut config = extra;
    config["cors_origins"] = json!([format!("http://127.0.0.1:{port}")]);
    let gw = Gateway::start(&config.to_string(), demo).await;
    wait_ready(&gw).await;
    gw
}

/// Runs the app in Chromium on `script` (the driver's script, with the bundle and `port`
/// added): its report, asserted complete, with nothing in the browser console's errors, no
/// HTTP error answer, and no request to another host.
async fn app(port: u16, mut script: Value) -> Value {
    let bundle = bundle().await;
    script["app"] = json!(bundle);
    script["port"] = json!(port);
    let started = Instant::now();
    let out = tokio::process::Command::new("node")
        .arg(root().join("tests/react/app.test.mjs"))
        .arg(script.to_string())
        .output()
        .await
        .expect("run node");
    let report = driver_report(&out, "the app driver");
    eprintln!("react app session: {:?}", started.elapsed());
    assert!(
        out.status.success() && report["ok"] == true,
        "the app session failed: {report:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["console"], json!([]), "console errors: {report:#}");
    assert_eq!(report["http"], json!([]), "HTTP errors: {report:#}");
    assert_eq!(report["external"], json!([]), "other hosts: {report:#}");
    for step in report["steps"].as_array().unwrap() {
        assert_eq!(step["errors"], json!([]), "CopilotKit's errors: {step:#}");
    }
    report
}

/// `(kind, text)` of each message the chat rendered.
fn rendered(step: &Value) -> Vec<(String, String)> {
    step["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["kind"].as_str().unwrap().to_owned(),
                m["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn said(kind: &str, text: &str) -> (String, String) {
    (kind.to_owned(), text.to_owned())
}

fn ids(messages: &Value) -> Vec<&str> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect()
}

fn events_of<'a>(step: &'a Value, kind: &str) -> Vec<&'a Value> {
    step["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

fn requests(step: &Value) -> Vec<&str> {
    step["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect()
}

/// `<CopilotKit>` with no `agentId` (and no thread) against a gateway whose only agent is the
/// demo: CopilotKit asks for `default`, `copilotkit.default_agent` answers, and the chat shows
/// the demo's reply — the gateway's (`echo hello` answers `hello`, not the text sent).
#[tokio::test(flavor = "multi_thread")]
async fn an_app_that_names_no_agent_chats_with_the_only_agent() {
    let port = free_port();
    let gw = gateway(port, json!({})).await;
    let report = app(
        port,
        json!({
            "runtimeUrl": format!("{}/copilotkit", gw.base),
            "steps": [{"send": "echo hello"}],
        }),
    )
    .await;
    let step = &report["steps"][0];
    assert_eq!(
        rendered(step),
        [said("user", "echo hello"), said("assistant", "hello")],
        "{step:#}"
    );
    assert_eq!(
        requests(step),
        ["POST /copilotkit/agent/default/run"],
        "{step:#}"
    );
    // The reply shown is the message the gateway streamed.
    let started = events_of(step, "TEXT_MESSAGE_START");
    assert_eq!(started.len(), 1, "{step:#}");
    assert_eq!(step["messages"][1]["id"], started[0]["messageId"]);
    assert_eq!(
        events_of(step, "RUN_FINISHED")[0]["threadId"],
        events_of(step, "RUN_STARTED")[0]["threadId"]
    );
}

/// `useCapabilities(agentId)` as the app renders it: what the gateway's `/info` says of the
/// agent, with the demo card's identity.
#[tokio::test(flavor = "multi_thread")]
async fn use_capabilities_shows_the_cards_identity() {
    let port = free_port();
    let gw = gateway(port, json!({})).await;
    let info: Value = reqwest::get(format!("{}/copilotkit/info", gw.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let report = app(
        port,
        json!({"runtimeUrl": format!("{}/copilotkit", gw.base), "agentId": "demo", "steps": []}),
    )
    .await;
    let seen = &report["final"]["capabilities"];
    let identity = &seen["identity"];
    assert_eq!(identity["name"], "agui-a2a-gateway demo agent", "{seen:#}");
    assert_eq!(identity["type"], "a2a");
    assert_eq!(identity["provider"], "agui-a2a-gateway");
    assert_eq!(identity["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        identity["description"]
            .as_str()
            .unwrap()
            .contains("echo <text>"),
        "{identity}"
    );
    assert_eq!(seen["transport"]["streaming"], true, "{seen:#}");
    assert_eq!(*seen, info["agents"]["demo"]["capabilities"], "{info:#}");
}

/// Two turns, then a reload: the page starts empty, CopilotKit's `connect` asks the gateway
/// for the thread, and the chat shows the same four messages — the ones of the gateway's
/// `MESSAGES_SNAPSHOT`. The app sends an API key, as a deployed app does, through CORS.
#[tokio::test(flavor = "multi_thread")]
async fn a_reload_restores_the_thread() {
    let port = free_port();
    let gw = gateway(
        port,
        json!({"auth": {"api_keys": [{"name": "alice", "key": KEY}]}}),
    )
    .await;
    let report = app(
        port,
        json!({
            "runtimeUrl": format!("{}/copilotkit", gw.base),
            "agentId": "demo",
            "threadId": "react-reload",
            "key": KEY,
            "steps": [
                {"send": "echo one"},
                {"send": "echo two"},
                {"reload": true, "messages": 4},
            ],
        }),
    )
    .await;
    let two_turns = [
        said("user", "echo one"),
        said("assistant", "one"),
        said("user", "echo two"),
        said("assistant", "two"),
    ];
    let (before, after) = (&report["steps"][1], &report["steps"][2]);
    assert_eq!(rendered(before), two_turns, "{before:#}");
    assert_eq!(rendered(after), two_turns, "{after:#}");
    assert!(
        requests(after).contains(&"POST /copilotkit/agent/demo/connect"),
        "{:?}",
        requests(after)
    );
    // What the reloaded page shows is the gateway's snapshot of the thread.
    let snapshots = events_of(after, "MESSAGES_SNAPSHOT");
    assert_eq!(snapshots.len(), 1, "{after:#}");
    assert_eq!(
        ids(&after["messages"]),
        ids(&snapshots[0]["messages"]),
        "{after:#}"
    );
    assert_eq!(
        events_of(after, "RUN_STARTED")[0]["threadId"],
        "react-reload"
    );
}

/// `(id, name, archived)` of each thread of the app's list (`useThreads`) at a step.
fn listed(step: &Value) -> Vec<(String, String, bool)> {
    step["threads"]
        .as_array()
        .unwrap_or_else(|| panic!("a loaded thread list: {step:#}"))
        .iter()
        .map(|t| {
            let name = t["name"].as_str().unwrap_or("<null>").to_owned();
            let id = t["id"].as_str().unwrap().to_owned();
            (id, name, t["archived"].as_bool().unwrap())
        })
        .collect()
}

/// Asserts what `read` finds in step `i` of a browser report, naming the transport and
/// showing the step when it differs.
fn assert_step<T: PartialEq + std::fmt::Debug, const N: usize>(
    steps: &[Value],
    transport: &str,
    i: usize,
    read: fn(&Value) -> Vec<T>,
    expected: [T; N],
) {
    assert_eq!(read(&steps[i]), expected, "{transport}: {:#}", steps[i]);
}

fn entry(id: &str, name: &str, archived: bool) -> (String, String, bool) {
    (id.to_owned(), name.to_owned(), archived)
}

/// CopilotKit's thread list (`useThreads` from `@copilotkit/react-core/v2`, docs/copilotkit.md)
/// answered by the gateway from A2A: threads started in the app and one started by a plain
/// A2A client (the a2a-sdk reference agent, `visibility: shared`) appear, titled by their
/// first message; opening each restores its conversation; rename, archive and delete work and
/// are still there after a reload; an archived thread shows with `includeArchived` and comes
/// back when unarchived.
#[tokio::test(flavor = "multi_thread")]
async fn the_thread_list_switches_renames_archives_and_deletes() {
    for transport in ["rest", "single"] {
        thread_list_session(transport).await;
    }
}

/// The session of [`the_thread_list_switches_renames_archives_and_deletes`] on `transport`
/// (`single`: CopilotKit sends the thread routes in the single-route envelope).
async fn thread_list_session(transport: &str) {
    let port = free_port();
    let up = Upstream::start("both");
    let plain = format!("react-plain-{}", std::process::id());
    a2a_send(
        &up.url,
        "react-plain-msg",
        &plain,
        "echo from a plain client",
    )
    .await;
    let gw = gateway_with(
        port,
        json!({"auth": {"api_keys": [{"name": "alice", "key": KEY}]},
            "agents": [{"name": "ref", "url": up.url, "visibility": "shared"}]}),
        false,
    )
    .await;
    let report = app(
        port,
        json!({
            "runtimeUrl": format!("{}/copilotkit", gw.base),
            "agentId": "ref",
            "threadId": "react-t1",
            "key": KEY,
            "threads": "1",
            "transport": transport,
            "steps": [
                {"send": "echo first thread"},
                {"goto": {"threadId": "react-t2"}, "messages": 0},
                {"send": "echo second thread"},
                {"reload": true, "messages": 2},
                {"threads": 3},
                {"thread": {"open": "react-t1"}, "messages": 2},
                {"thread": {"open": plain}, "messages": 2},
                {"thread": {"rename": "react-t1", "to": "Renamed in the app"}},
                {"thread": {"archive": "react-t2"}},
                {"thread": {"delete": plain}},
                {"reload": true},
                {"threads": 1},
                {"goto": {"archived": "1"}},
                {"threads": 2},
                {"thread": {"unarchive": "react-t2"}},
                {"goto": {"archived": null}},
                {"threads": 2},
            ],
        }),
    )
    .await;
    let steps = report["steps"].as_array().unwrap();
    assert_step(
        steps,
        transport,
        4,
        listed,
        [
            entry("react-t2", "echo second thread", false),
            entry("react-t1", "echo first thread", false),
            entry(&plain, "echo from a plain client", false),
        ],
    );
    // Switching restores each conversation.
    assert_step(
        steps,
        transport,
        5,
        rendered,
        [
            said("user", "echo first thread"),
            said("assistant", "first thread"),
        ],
    );
    assert_eq!(steps[5]["threadId"], "react-t1");
    assert_step(
        steps,
        transport,
        6,
        rendered,
        [
            said("user", "echo from a plain client"),
            said("assistant", "from a plain client"),
        ],
    );
    for step in &steps[7..10] {
        let ops = step["threadOps"].as_array().unwrap();
        assert_eq!(ops.last().unwrap()["ok"], true, "{step:#}");
    }
    let archive = match transport {
        "rest" => "POST /copilotkit/threads/react-t2/archive",
        _ => "POST /copilotkit",
    };
    assert_eq!(requests(&steps[8]), [archive], "{transport}");
    // After a reload: renamed, archived (hidden) and deleted (gone) as left.
    assert_step(
        steps,
        transport,
        11,
        listed,
        [entry("react-t1", "Renamed in the app", false)],
    );
    assert_step(
        steps,
        transport,
        13,
        listed,
        [
            entry("react-t2", "echo second thread", true),
            entry("react-t1", "Renamed in the app", false),
        ],
    );
    assert_step(
        steps,
        transport,
        16,
        listed,
        [
            entry("react-t2", "echo second thread", false),
            entry("react-t1", "Renamed in the app", false),
        ],
    );
}

/// `(done, expanded, visible)` of each reasoning block the chat rendered: `done` when its
/// header says "Thought for …" (not "Thinking…").
fn reasoning_blocks(step: &Value) -> Vec<(bool, bool, bool)> {
    step["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "reasoning")
        .map(|m| {
            (
                m["label"].as_str().unwrap().starts_with("Thought for "),
                m["expanded"].as_bool().unwrap(),
                m["visible"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// The real ADK 2.13 peer with its scripted thinking model (`tests/frameworks/adk/agent.py`:
/// `think` thinks, calls get_weather, thinks again, answers): the chat shows each stretch of
/// thinking as CopilotKit's reasoning block ("Thought for …", collapsed once the run is over,
/// its text shown when the user opens it) and the answer apart, the thoughts nowhere in the
/// answer nor in any text the run streamed; a reload (CopilotKit's `connect`, the gateway's
/// `MESSAGES_SNAPSHOT` rebuilt from the A2A task) shows the same blocks and answer again, in
/// the same order under the same ids.
#[tokio::test(flavor = "multi_thread")]
async fn reasoning_is_shown_as_reasoning_live_and_after_a_reload() {
    use crate::frameworks::{peer, thread, ADK_THOUGHTS, SUNNY};
    let adk = peer("adk", "sse");
    let port = free_port();
    let gw = gateway_with(
        port,
        json!({"agents": [{"name": "adk", "url": adk.url}]}),
        false,
    )
    .await;
    let report = app(
        port,
        json!({
            "runtimeUrl": format!("{}/copilotkit", gw.base),
            "agentId": "adk",
            "threadId": thread("react-think"),
            "steps": [
                {"send": "think about the weather in Paris"},
                {"expand": true},
                {"reload": true, "messages": 5},
                {"expand": true},
            ],
        }),
    )
    .await;
    let steps = report["steps"].as_array().unwrap();
    let (live, live_open, reloaded, reloaded_open) = (&steps[0], &steps[1], &steps[2], &steps[3]);
    // The user's question, a thought, the tool call (an assistant message CopilotKit renders
    // empty: the app renders no tools), the second thought, the answer.
    let turn = [
        said("user", "think about the weather in Paris"),
        said("reasoning", ADK_THOUGHTS[0]),
        said("assistant", ""),
        said("reasoning", ADK_THOUGHTS[1]),
        said("assistant", SUNNY),
    ];
    for step in [live, live_open, reloaded, reloaded_open] {
        assert_eq!(rendered(step), turn, "{step:#}");
        for (kind, text) in rendered(step) {
            if kind != "reasoning" {
                for thought in ADK_THOUGHTS {
                    assert!(
                        !text.contains(thought),
                        "a thought in a {kind} message: {text:?}"
                    );
                }
            }
        }
    }
    // Collapsed once the thinking is over, live and after the reload; open when clicked.
    let done = |open| vec![(true, open, open); 2];
    assert_eq!(reasoning_blocks(live), done(false), "{live:#}");
    assert_eq!(reasoning_blocks(live_open), done(true), "{live_open:#}");
    assert_eq!(reasoning_blocks(reloaded), done(false), "{reloaded:#}");
    assert_eq!(
        reasoning_blocks(reloaded_open),
        done(true),
        "{reloaded_open:#}"
    );

    // Live: the thoughts arrived as reasoning events, the blocks are those messages, and no
    // text message carried a thought.
    let thought_ids: Vec<&Value> = events_of(live, "REASONING_MESSAGE_START")
        .iter()
        .map(|e| &e["messageId"])
        .collect();
    let shown_ids: Vec<&Value> = live["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "reasoning")
        .map(|m| &m["id"])
        .collect();
    assert_eq!(thought_ids.len(), 2, "{live:#}");
    assert_eq!(shown_ids, thought_ids, "{live:#}");
    let streamed: String = events_of(live, "TEXT_MESSAGE_CONTENT")
        .iter()
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, SUNNY, "{live:#}");

    // The reload: CopilotKit's connect, the gateway's snapshot, the same messages (the tool
    // result is not rendered) under the same ids.
    assert!(
        requests(reloaded).contains(&"POST /copilotkit/agent/adk/connect"),
        "{:?}",
        requests(reloaded)
    );
    let snapshots = events_of(reloaded, "MESSAGES_SNAPSHOT");
    assert_eq!(snapshots.len(), 1, "{reloaded:#}");
    let snapshot: Vec<&Value> = snapshots[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "tool")
        .collect();
    let roles: Vec<&str> = snapshot
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "reasoning", "assistant", "reasoning", "assistant"],
        "{reloaded:#}"
    );
    let snapshot_ids: Vec<&str> = snapshot.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids(&reloaded["messages"]), snapshot_ids, "{reloaded:#}");
    assert_eq!(ids(&reloaded["messages"]), ids(&live["messages"]));
}
