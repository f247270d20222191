//! The read loop ([`super`]) on tokio's paused clock: a scripted upstream stream (events,
//! gaps, a cut, silence) and a scripted [`Resubscribe`]. Each test states one bound or rule
//! of the loop and fails when it is broken: the first-event and idle timeouts fire at their
//! setting and not before, the event limit, the batch bounds, recovery after a cut (and a
//! failed one naming why), and the run timeout of [`super::super::bounded`].

use std::collections::VecDeque;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

use super::super::meter::{RunMeter, Sink, TaskFacts};
use super::super::{Run, RunRequest};
use super::Resubscribe;
use crate::a2a::client::{ClientError, EventStream};
use crate::a2a::jsonrpc::frame as decode_frame;
use crate::a2a::model::{ProtocolVersion, StreamEvent, Task};
use crate::agui::{Event, RunAgentInput};
use crate::app::state::Shared;
use crate::config::{nonzero_u64, Millis};
use crate::error::RunError;
use crate::ids::TaskId;
use crate::registry::Registry;

const TASK: &str = "t-1";
const CONTEXT: &str = "c-1";

/// One step of a scripted upstream stream.
enum Step {
    Event(Box<StreamEvent>),
    Wait(Duration),
    Fail(ClientError),
    /// Never another item.
    Silence,
}

impl Step {
    fn event(event: StreamEvent) -> Self {
        Step::Event(Box::new(event))
    }
}

/// A stream that plays `steps`, then ends.
fn scripted(steps: Vec<Step>) -> EventStream {
    let steps: VecDeque<Step> = steps.into();
    Box::pin(futures::stream::unfold(steps, |mut steps| async move {
        loop {
            match steps.pop_front()? {
                Step::Wait(d) => tokio::time::sleep(d).await,
                Step::Event(e) => return Some((Ok(*e), steps)),
                Step::Fail(e) => return Some((Err(e), steps)),
                Step::Silence => std::future::pending::<()>().await,
            }
        }
    }))
}

fn frame(result: serde_json::Value) -> StreamEvent {
    let data = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": result});
    decode_frame(ProtocolVersion::V1, &data.to_string()).expect("a 1.0 frame")
}

fn task(state: &str) -> Task {
    match frame(
        serde_json::json!({"task": {"id": TASK, "contextId": CONTEXT,
        "status": {"state": state}}}),
    ) {
        StreamEvent::Task(task) => task,
        other => panic!("{other:?}"),
    }
}

fn status(state: &str, text: Option<&str>) -> StreamEvent {
    let mut status = serde_json::json!({"state": state});
    if let Some(text) = text {
        status["message"] = serde_json::json!({"messageId": format!("m-{text}"),
            "role": "ROLE_AGENT", "parts": [{"text": text}]});
    }
    frame(
        serde_json::json!({"statusUpdate": {"taskId": TASK, "contextId": CONTEXT,
        "status": status}}),
    )
}

/// A text chunk of one artifact (appended).
fn chunk(text: &str) -> StreamEvent {
    frame(
        serde_json::json!({"artifactUpdate": {"taskId": TASK, "contextId": CONTEXT,
        "append": true, "artifact": {"artifactId": "a", "parts": [{"text": text}]}}}),
    )
}

/// What a resubscription or a task read after a cut answers.
#[derive(Default)]
struct Upstream {
    resubscriptions: Mutex<VecDeque<Result<Vec<Step>, ClientError>>>,
    task: Mutex<Option<Task>>,
    subscribed: Mutex<u32>,
}

impl Upstream {
    /// An upstream that refuses the first resubscription with the A2A error `code`.
    fn refusing(code: i64, message: &str) -> Self {
        let refused = ClientError::Rpc(crate::a2a::model::RpcError {
            code,
            message: message.into(),
            data: None,
        });
        let upstream = Self::default();
        upstream
            .resubscriptions
            .lock()
            .unwrap()
            .push_back(Err(refused));
        upstream
    }
}

impl Resubscribe for Upstream {
    fn streams(&self) -> bool {
        true
    }

    fn subscribe<'a>(&'a self, _: &'a TaskId) -> BoxFuture<'a, Result<EventStream, ClientError>> {
        *self.subscribed.lock().unwrap() += 1;
        let next = self.resubscriptions.lock().unwrap().pop_front();
        async move {
            match next {
                Some(Ok(steps)) => Ok(scripted(steps)),
                Some(Err(e)) => Err(e),
                None => Err(ClientError::Unavailable("no resubscription".into())),
            }
        }
        .boxed()
    }

    fn get_task<'a>(&'a self, _: &'a TaskId) -> BoxFuture<'a, Result<Task, ClientError>> {
        let task = self.task.lock().unwrap().clone();
        async move { task.ok_or_else(|| ClientError::Unavailable("no task".into())) }.boxed()
    }
}

/// The bounds a test runs with, as the config file writes them (timeouts in milliseconds).
struct Bounds {
    first_event_ms: Millis,
    idle_ms: Millis,
    max_events: NonZeroU64,
}

const BOUNDS: Bounds = Bounds {
    first_event_ms: Millis::new(60_000),
    idle_ms: Millis::new(300_000),
    max_events: nonzero_u64(100_000),
};

/// A run of one user message, started (its early events handed on), and the receiving end
/// of its response.
async fn run(bounds: Bounds) -> (Run, mpsc::Receiver<Vec<Event>>) {
    let mut file: crate::config::FileConfig =
        serde_yaml_ng::from_str("agents: [{name: a, url: 'http://127.0.0.1:9'}]").unwrap();
    file.limits.max_events_per_run = bounds.max_events;
    file.timeouts.first_event = bounds.first_event_ms;
    file.timeouts.idle = bounds.idle_ms;
    let settings = crate::config::settings(file, Default::default()).unwrap();
    let registry = Arc::new(
        Registry::new(
            settings.agents.clone(),
            Duration::from_secs(1),
            Duration::from_secs(1),
            1 << 20,
        )
        .unwrap(),
    );
    let input: RunAgentInput = serde_json::from_value(serde_json::json!({
        "threadId": "thread", "runId": "run", "state": {}, "tools": [], "context": [],
        "forwardedProps": {}, "messages": [{"id": "u1", "role": "user", "content": "hi"}]
    }))
    .unwrap();
    let options = crate::bridge::request::RunOptions::parse(&input).unwrap();
    let plan = crate::bridge::request::plan(&input, options).unwrap();
    let agent = registry.get("a").unwrap();
    let env = Shared::for_tests(&settings, registry).run;
    let (tx, rx) = mpsc::channel(1024);
    let sink = Sink {
        tx,
        client_write: settings.timeouts.client_write(),
        meter: Arc::new(RunMeter {
            metrics: env.metrics.clone(),
            agent: "a".into(),
            started: std::time::Instant::now(),
            trace: None,
            ended: Mutex::new(None),
            task: Mutex::new(TaskFacts::default()),
        }),
    };
    let request = RunRequest {
        agent,
        env,
        input,
        plan,
        permit: Arc::new(Semaphore::new(1)).try_acquire_owned().unwrap(),
        owner: crate::auth::Caller::anonymous().id,
        caller_token: None,
        may_pick_up: false,
        trace: None,
    };
    let mut run = Run::prepare(request, sink, Arc::new(Mutex::new(None))).await;
    let early = run.projector.start();
    assert!(run.sink.emit(early).await.is_ok());
    (run, rx)
}

/// Every batch the run handed on, once it is dropped.
fn batches(run: Run, mut rx: mpsc::Receiver<Vec<Event>>) -> Vec<Vec<Event>> {
    drop(run);
    let mut out = Vec::new();
    while let Ok(batch) = rx.try_recv() {
        out.push(batch);
    }
    out
}

fn terminal(batches: &[Vec<Event>]) -> &Event {
    let last = batches.last().and_then(|b| b.last()).expect("an event");
    assert!(last.is_terminal(), "{last:?}");
    last
}

fn run_error(batches: &[Vec<Event>]) -> (String, String) {
    match terminal(batches) {
        Event::RunError { message, code, .. } => {
            (code.clone().unwrap_or_default(), message.clone())
        }
        other => panic!("not a RUN_ERROR: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_event_timeout_fires_at_its_setting() {
    let (mut run, rx) = run(Bounds {
        first_event_ms: Millis::new(7_000),
        ..BOUNDS
    })
    .await;
    let started = Instant::now();
    let _ = run
        .pump(&Upstream::default(), scripted(vec![Step::Silence]))
        .await;
    assert_eq!(started.elapsed(), Duration::from_secs(7));
    let (code, message) = run_error(&batches(run, rx));
    assert_eq!(code, "upstream_timeout");
    assert!(message.contains("timeouts.first_event"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn the_idle_timeout_runs_between_events_and_each_event_restarts_it() {
    let (mut run, rx) = run(Bounds {
        idle_ms: Millis::new(5_000),
        ..BOUNDS
    })
    .await;
    let started = Instant::now();
    let steps = vec![
        Step::event(StreamEvent::Task(task("TASK_STATE_WORKING"))),
        Step::Wait(Duration::from_secs(4)),
        Step::event(status("TASK_STATE_WORKING", Some("still here"))),
        Step::Wait(Duration::from_secs(4)),
        Step::event(chunk("more")),
        Step::Silence,
    ];
    let _ = run.pump(&Upstream::default(), scripted(steps)).await;
    // Two gaps of 4 s are under the bound; the silence after the last event is cut at 5 s.
    assert_eq!(started.elapsed(), Duration::from_secs(13));
    let (code, message) = run_error(&batches(run, rx));
    assert_eq!(code, "upstream_timeout");
    assert!(message.contains("timeouts.idle"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn the_events_of_a_run_are_bounded() {
    let (mut run, rx) = run(Bounds {
        max_events: nonzero_u64(3),
        ..BOUNDS
    })
    .await;
    let mut steps = vec![Step::event(StreamEvent::Task(task("TASK_STATE_WORKING")))];
    steps.extend((0..10).map(|i| Step::event(chunk(&format!("c{i} ")))));
    let _ = run.pump(&Upstream::default(), scripted(steps)).await;
    let batches = batches(run, rx);
    let (code, message) = run_error(&batches);
    assert_eq!(code, "limit_exceeded");
    assert!(message.contains("max_events_per_run (3)"), "{message}");
    let text: String = batches
        .iter()
        .flatten()
        .filter_map(|e| match e {
            Event::TextMessageContent { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        text, "c0 c1 ",
        "only the events within the bound are projected"
    );
}

#[tokio::test(start_paused = true)]
async fn a_batch_holds_at_most_its_bound_of_ready_text_events() {
    let (mut run, rx) = run(BOUNDS).await;
    let mut steps = vec![Step::event(StreamEvent::Task(task("TASK_STATE_WORKING")))];
    // Progress text in status messages (as the demo agent's `bench` streams it): text only.
    steps.extend(
        (0..200).map(|i| Step::event(status("TASK_STATE_WORKING", Some(&format!("{i} "))))),
    );
    steps.push(Step::event(status("TASK_STATE_COMPLETED", None)));
    let _ = run.pump(&Upstream::default(), scripted(steps)).await;
    let batches = batches(run, rx);
    assert!(matches!(terminal(&batches), Event::RunFinished { .. }));
    let per_batch: Vec<usize> = batches
        .iter()
        .map(|b| {
            b.iter()
                .filter(|e| matches!(e, Event::TextMessageContent { .. }))
                .count()
        })
        .filter(|n| *n > 0)
        .collect();
    assert!(
        per_batch.iter().all(|n| *n <= super::MAX_BATCH_EVENTS),
        "{per_batch:?}"
    );
    assert_eq!(per_batch.iter().sum::<usize>(), 200, "{per_batch:?}");
    eprintln!("{per_batch:?}");
    assert!(
        per_batch.len() >= 200 / super::MAX_BATCH_EVENTS,
        "{per_batch:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cut_stream_is_resubscribed_and_the_run_finishes() {
    let (mut run, rx) = run(BOUNDS).await;
    let upstream = Upstream::default();
    upstream.resubscriptions.lock().unwrap().push_back(Ok(vec![
        Step::event(StreamEvent::Task(task("TASK_STATE_WORKING"))),
        Step::event(status("TASK_STATE_COMPLETED", Some("done"))),
    ]));
    let steps = vec![
        Step::event(StreamEvent::Task(task("TASK_STATE_WORKING"))),
        Step::event(status("TASK_STATE_WORKING", Some("half"))),
        Step::Fail(ClientError::Unavailable("connection reset".into())),
    ];
    let _ = run.pump(&upstream, scripted(steps)).await;
    assert_eq!(*upstream.subscribed.lock().unwrap(), 1);
    let batches = batches(run, rx);
    assert!(
        matches!(terminal(&batches), Event::RunFinished { .. }),
        "{batches:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cut_that_cannot_be_recovered_names_why_the_stream_ended() {
    let (mut run, rx) = run(BOUNDS).await;
    let upstream = Upstream::default();
    let steps = vec![
        Step::event(StreamEvent::Task(task("TASK_STATE_WORKING"))),
        Step::Fail(ClientError::Unavailable(
            "a malformed chunked body: a chunked body line ended by a bare LF".into(),
        )),
    ];
    let started = Instant::now();
    let _ = run.pump(&upstream, scripted(steps)).await;
    // Bounded retries with backoff (100, 200, 400 ms), then the task read.
    assert_eq!(
        *upstream.subscribed.lock().unwrap(),
        super::RECOVERY_ATTEMPTS
    );
    assert_eq!(started.elapsed(), super::RECOVERY_BACKOFF * 7);
    let (code, message) = run_error(&batches(run, rx));
    assert_eq!(code, "upstream_stream_ended");
    assert!(message.contains("bare LF"), "{message}");
}

/// A cut on a framing error whose resubscribe the agent refuses (no `tasks/resubscribe`:
/// -32601): the run names the cut first and the refused recovery after it, like a
/// resubscribe that could not connect.
#[tokio::test(start_paused = true)]
async fn a_refused_recovery_keeps_the_cut_as_its_cause() {
    for cut in [
        "a malformed chunked body: a chunk size that is not hex digits",
        "a malformed chunked body: a chunked body line ended by a bare LF",
    ] {
        let (mut run, rx) = run(BOUNDS).await;
        let upstream = Upstream::refusing(crate::a2a::rpc_code::METHOD_NOT_FOUND, "no");
        let steps = vec![
            Step::event(StreamEvent::Task(task("TASK_STATE_WORKING"))),
            Step::Fail(ClientError::Unavailable(cut.into())),
        ];
        let _ = run.pump(&upstream, scripted(steps)).await;
        // Refused is final: one attempt, then the task read (which fails here too).
        assert_eq!(*upstream.subscribed.lock().unwrap(), 1);
        let (code, message) = run_error(&batches(run, rx));
        assert_eq!(code, "upstream_stream_ended");
        let (framing, refused) = (message.find(cut), message.find("-32601"));
        assert!(
            matches!((framing, refused), (Some(f), Some(r)) if f < r),
            "{message}"
        );
        assert!(message.contains("resubscribing was refused"), "{message}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_before_any_task_names_the_cause() {
    let (mut run, rx) = run(BOUNDS).await;
    let steps = vec![Step::Fail(ClientError::Unavailable(
        "connection reset".into(),
    ))];
    let _ = run.pump(&Upstream::default(), scripted(steps)).await;
    let (code, message) = run_error(&batches(run, rx));
    assert_eq!(code, "upstream_stream_ended");
    assert!(
        message.contains("connection reset") && message.contains("before any task"),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_ended_with_the_task_unfinished_reads_the_finished_task() {
    let (mut run, rx) = run(BOUNDS).await;
    let code = crate::a2a::rpc_code::UNSUPPORTED_OPERATION;
    let upstream = Upstream::refusing(code, "the task is finished");
    *upstream.task.lock().unwrap() = Some(task("TASK_STATE_COMPLETED"));
    let steps = vec![Step::event(StreamEvent::Task(task("TASK_STATE_WORKING")))];
    let _ = run.pump(&upstream, scripted(steps)).await;
    assert!(matches!(
        terminal(&batches(run, rx)),
        Event::RunFinished { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn the_run_timeout_ends_a_run_at_its_setting() {
    let started = Instant::now();
    let never = std::future::pending::<()>();
    let (_stop_tx, mut stop) = tokio::sync::watch::channel(false);
    let ended = super::super::bounded(Duration::from_secs(30), &mut stop, never).await;
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert!(
        matches!(&ended, Some(RunError::UpstreamTimeout(m)) if m.contains("timeouts.run")),
        "{ended:?}"
    );
}
