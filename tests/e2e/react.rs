//! A CopilotKit React app (`@copilotkit/react-core` 1.74, v2 API: `CopilotKit`,
//! `CopilotChat`, `useAgent`, `useCapabilities`; `tests/react/`) in Debian's Chromium, served
//! from its own origin and pointed at the gateway's CopilotKit routes by `runtimeUrl`, as a
//! deployed app is: the gateway allows that origin (`cors_origins`). The driver
//! (`tests/react/app.test.mjs`) types into CopilotKit's chat, reloads, and reports what the
//! chat rendered, what `useCapabilities` returned, the AG-UI events the agent received, the
//! requests the page sent, and every console error.

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
    let mut config = extra;
    config["cors_origins"] = json!([format!("http://127.0.0.1:{port}")]);
    let gw = Gateway::start(&config.to_string(), true).await;
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no report from the app driver: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
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
