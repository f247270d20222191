//! The demo agent's scripted scenarios: what a task does after it is created or answered,
//! and how each update is recorded on the task and published.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::{now, stamp_nanos, AgentMessage, Demo, Shared, Turn, Update, HELP};
use crate::a2a::model::TaskState;

/// Publishes a task's updates: recorded on the task, broadcast to subscribers, and sent
/// with backpressure to the stream that started this turn (so a fast scenario never
/// outruns its reader).
pub(super) struct Emitter {
    pub(super) demo: Shared,
    pub(super) task_id: String,
    pub(super) origin: mpsc::Sender<Update>,
}

impl Emitter {
    async fn emit(&self, u: Update) {
        apply(&self.demo, &self.task_id, u.clone());
        let _ = self.origin.send(u).await;
    }
}

pub(super) fn status(state: TaskState, text: Option<String>) -> Update {
    Update::Status {
        state,
        message: text.map(AgentMessage::new),
    }
}

/// The `i`-th word after the command as a number, or `default`.
fn number<T: std::str::FromStr>(args: &[&str], i: usize, default: T) -> T {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

/// The steps of a scenario after the task exists.
pub(super) async fn script(out: Emitter, text: String, follow_up: Option<&'static str>) {
    out.emit(status(TaskState::Working, None)).await;
    if let Some(kind) = follow_up {
        let reply = match kind {
            "auth" => format!("Authenticated, thanks: {text}"),
            _ => format!("Approved: {text}"),
        };
        out.emit(status(TaskState::Completed, Some(reply))).await;
        return;
    }
    let mut words = text.split_whitespace();
    let command = words.next().unwrap_or_default().to_ascii_lowercase();
    let args: Vec<&str> = words.collect();
    match command.as_str() {
        "echo" => {
            for w in &args {
                out.emit(status(TaskState::Working, Some(format!("{w} "))))
                    .await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            out.emit(status(TaskState::Completed, Some(args.join(" "))))
                .await;
        }
        "artifact" => {
            let chunks = ["Hello ", "from ", "artifact."];
            for (i, c) in chunks.iter().enumerate() {
                out.emit(Update::Artifact {
                    id: "artifact-1".into(),
                    name: "result.txt".into(),
                    text: (*c).into(),
                    append: i > 0,
                    last_chunk: i == chunks.len() - 1,
                })
                .await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            out.emit(status(TaskState::Completed, Some("Artifact ready.".into())))
                .await;
        }
        "approve" => {
            out.emit(status(
                TaskState::InputRequired,
                Some("Do you approve? Reply yes or no.".into()),
            ))
            .await
        }
        "auth" => {
            out.emit(status(
                TaskState::AuthRequired,
                Some("Please authenticate, then reply.".into()),
            ))
            .await
        }
        "fail" => {
            out.emit(status(TaskState::Failed, Some("Simulated failure.".into())))
                .await
        }
        "idle" => {
            // An open, quiet stream (the benchmark's memory-per-stream figure).
            let secs: u64 = number(&args, 0, 10).min(3600);
            tokio::time::sleep(Duration::from_secs(secs)).await;
            out.emit(status(
                TaskState::Completed,
                Some(format!("idle {secs} done")),
            ))
            .await;
        }
        "slow" => {
            let n: u32 = number(&args, 0, 3).min(100_000);
            for i in 1..=n {
                tokio::time::sleep(Duration::from_millis(100)).await;
                out.emit(status(TaskState::Working, Some(format!("tick {i}/{n}"))))
                    .await;
            }
            out.emit(status(TaskState::Completed, Some(format!("slow {n} done"))))
                .await;
        }
        "bench" => {
            let n: usize = number(&args, 0, 1000).min(10_000_000);
            let k: usize = number(&args, 1, 64).clamp(40, 4_000_000);
            // Optional pacing in events per second; absent or 0 means as fast as possible.
            let rate: usize = number(&args, 2, 0);
            let start = tokio::time::Instant::now();
            for i in 0..n {
                if rate > 0 {
                    let due = Duration::from_secs_f64(i as f64 / rate as f64);
                    tokio::time::sleep_until(start + due).await;
                }
                // Each event carries its send time, for the benchmark's latency figures.
                let mut text = format!("t={} i={i} ", stamp_nanos());
                text.extend(std::iter::repeat_n('x', k.saturating_sub(text.len())));
                out.emit(status(TaskState::Working, Some(text))).await;
            }
            let done = format!("bench {n} {k} done");
            out.emit(status(TaskState::Completed, Some(done))).await;
        }
        _ => {
            out.emit(status(TaskState::Completed, Some(HELP.into())))
                .await
        }
    }
}

/// Records an update on the task and publishes it.
pub(super) fn apply(demo: &Demo, task_id: &str, update: Update) {
    let Some(mut t) = demo.tasks.get_mut(task_id) else {
        return;
    };
    match &update {
        Update::Status { state, message } => {
            // Like a2a-sdk's TaskManager: the previous status message moves into history.
            if let Some(prev) = t.status_message.take() {
                t.history.push(Turn {
                    id: prev.id,
                    user: false,
                    text: prev.text,
                });
            }
            t.state = state.clone();
            t.status_message = message.clone();
            t.timestamp = now();
            t.waiting = match state {
                TaskState::InputRequired => Some("approve"),
                TaskState::AuthRequired => Some("auth"),
                _ => None,
            };
        }
        Update::Artifact {
            id,
            name,
            text,
            append,
            ..
        } => {
            let entry = t
                .artifacts
                .entry(id.clone())
                .or_insert_with(|| (name.clone(), Vec::new()));
            if !append {
                entry.1.clear();
            }
            entry.1.push(text.clone());
        }
    }
    let _ = t.updates.send(update);
}

pub(super) fn user_text(message: &Value) -> String {
    message
        .get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

pub(super) fn is_final(state: &TaskState) -> bool {
    state.is_terminal() || state.is_interrupted()
}
