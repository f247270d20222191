//! The demo agent's HTTP+JSON binding (A2A 1.0 §11, docs/bindings.md): the routes a2a-sdk
//! 1.3.0 serves (`server/routes/rest_routes.py`), under the agent's URL and again under
//! `/{tenant}` (the demo has one tenant: any is accepted and ignored):
//!
//! - `POST /message:send` → `SendMessageResponse`; `POST /message:stream` → SSE of bare
//!   `StreamResponse`s;
//! - `GET /tasks/{id}?historyLength=N` → `Task`; `GET /tasks?contextId=…&pageSize=…&
//!   pageToken=…&historyLength=…` → `ListTasksResponse`;
//! - `POST /tasks/{id}:cancel` → `Task`; `POST` (or `GET`, as the proto annotates it)
//!   `/tasks/{id}:subscribe` → SSE.
//!
//! Every call needs `A2A-Version: 1.x`. Bodies are the ProtoJSON of [`super::wire`] without
//! an envelope. A failure is its HTTP status with a `google.rpc.Status` body naming the A2A
//! error by its `ErrorInfo` reason (the one table, `crate::a2a::errors`), as a2a-sdk's
//! `utils/error_handlers.py` writes it; a stream fails before it starts or not at all.
//! The `{id}:action` segment is split at its last `:` once percent-decoded (a task id with a
//! `:` of its own is none of the demo's: it is not found either way).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::{wire, Failure, ListQuery, Sent, Shared};
use crate::a2a::errors;
use crate::a2a::model::ProtocolVersion::V1;
use crate::a2a::rpc_code;

/// The routes, at the agent's URL and under a tenant.
pub(super) fn routes() -> Router<Shared> {
    let routes = Router::new()
        .route("/message:send", post(send))
        .route("/message:stream", post(stream))
        .route("/tasks", get(list))
        .route("/tasks/{task}", get(get_task).post(task_action));
    Router::new()
        .nest("/{tenant}", routes.clone())
        .merge(routes)
}

/// A route's path captures (`tenant` when nested, `task`).
type Captures = Path<Vec<(String, String)>>;

type Params = Query<HashMap<String, String>>;

/// The call's answer, or its failure as the binding writes it.
fn respond(answer: Result<Response, Failure>) -> Response {
    answer.unwrap_or_else(|f| error(&f))
}

fn v1(headers: &HeaderMap) -> Result<(), Failure> {
    let header = headers
        .get(super::A2A_VERSION)
        .and_then(|h| h.to_str().ok());
    if super::asks_v1(header) {
        Ok(())
    } else {
        Err(Failure::version())
    }
}

fn body_json(body: &Bytes) -> Result<Value, Failure> {
    serde_json::from_slice(body)
        .map_err(|_| Failure::new(rpc_code::INVALID_REQUEST, "The body is not JSON"))
}

async fn send(State(demo): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let answer = async {
        v1(&headers)?;
        let params = body_json(&body)?;
        let answer = super::send_blocking(&demo, wire::incoming(&params)).await?;
        Ok(Json(wire::answer_json(V1, &answer)).into_response())
    };
    respond(answer.await)
}

async fn stream(State(demo): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    respond((|| {
        v1(&headers)?;
        let params = body_json(&body)?;
        Ok(match super::send(&demo, wire::incoming(&params))? {
            Sent::Reply(r) => wire::sse(futures::stream::iter([wire::reply_json(V1, &r)])),
            Sent::Turn(feed) => wire::sse(feed.encoded(|e| wire::event_json(V1, e))),
        })
    })())
}

/// The task id and action (`cancel`, `subscribe`; none for the task itself) of a route's
/// `{task}` capture.
fn task_and_action(Path(captures): Captures) -> (String, Option<String>) {
    let raw = captures
        .into_iter()
        .find_map(|(k, v)| (k == "task").then_some(v))
        .unwrap_or_default();
    match raw.rsplit_once(':') {
        Some((id, action)) => (id.to_owned(), Some(action.to_owned())),
        None => (raw, None),
    }
}

/// A query parameter as a whole number; absent: `None`.
fn number(params: &HashMap<String, String>, name: &str) -> Result<Option<u64>, Failure> {
    params
        .get(name)
        .map(|v| {
            v.parse::<u64>().map_err(|_| {
                let msg = format!("{name} must be a whole number");
                Failure::new(rpc_code::INVALID_PARAMS, msg)
            })
        })
        .transpose()
}

fn history_length(params: &HashMap<String, String>) -> Result<Option<usize>, Failure> {
    Ok(number(params, "historyLength")?.map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
}

/// `GET /tasks/{id}`, or `GET /tasks/{id}:subscribe`.
async fn get_task(
    State(demo): State<Shared>,
    headers: HeaderMap,
    captures: Captures,
    Query(params): Params,
) -> Response {
    respond((|| {
        v1(&headers)?;
        match task_and_action(captures) {
            (id, None) => {
                let task = super::get_task(&demo, &id, history_length(&params)?)?;
                Ok(Json(wire::task_json(V1, &task)).into_response())
            }
            (id, Some(action)) if action == "subscribe" => subscribe(&demo, &id),
            (_, Some(_)) => Err(no_such_route()),
        }
    })())
}

/// `POST /tasks/{id}:cancel`, `POST /tasks/{id}:subscribe`.
async fn task_action(
    State(demo): State<Shared>,
    headers: HeaderMap,
    captures: Captures,
) -> Response {
    respond((|| {
        v1(&headers)?;
        match task_and_action(captures) {
            (id, Some(action)) if action == "cancel" => {
                let task = super::cancel(&demo, &id)?;
                Ok(Json(wire::task_json(V1, &task)).into_response())
            }
            (id, Some(action)) if action == "subscribe" => subscribe(&demo, &id),
            _ => Err(no_such_route()),
        }
    })())
}

fn subscribe(demo: &Shared, id: &str) -> Result<Response, Failure> {
    let feed = super::subscribe(demo, id)?;
    Ok(wire::sse(feed.encoded(|e| wire::event_json(V1, e))))
}

fn no_such_route() -> Failure {
    Failure::new(rpc_code::METHOD_NOT_FOUND, "No such route")
}

/// `GET /tasks`.
async fn list(State(demo): State<Shared>, headers: HeaderMap, Query(params): Params) -> Response {
    respond((|| {
        v1(&headers)?;
        let string = |name: &str| params.get(name).filter(|s| !s.is_empty()).cloned();
        let query = ListQuery {
            context_id: string("contextId"),
            page_size: number(&params, "pageSize")?,
            page_token: string("pageToken"),
            history_length: history_length(&params)?,
        };
        let page = super::list(&demo, &query)?;
        Ok(Json(wire::page_json(&page)).into_response())
    })())
}

/// A failure as HTTP+JSON writes it: the table's HTTP status, a `google.rpc.Status` body
/// with the `ErrorInfo` reason (an error outside the table: 500 `INTERNAL`).
fn error(f: &Failure) -> Response {
    let (status, grpc_status, reason) = f.a2a().map_or((500, "INTERNAL", "INTERNAL_ERROR"), |e| {
        (e.http_status, e.grpc_status, e.reason)
    });
    let body = json!({"error": {
        "code": status, "status": grpc_status, "message": f.message,
        "details": [{"@type": errors::ERROR_INFO_TYPE, "reason": reason,
            "domain": errors::ERROR_DOMAIN, "metadata": {}}],
    }});
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::model::{StreamEvent, TaskState};
    use crate::a2a::rest::{decode_frame, error_of};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    /// An answer: its status and body.
    async fn call(app: &Router, method: &str, path: &str, body: Option<Value>) -> (u16, String) {
        let req = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header(crate::demo::A2A_VERSION, "1.0")
            .header("content-type", "application/json");
        let body = body.map_or(axum::body::Body::empty(), |b| b.to_string().into());
        let resp = app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    /// A stream's events, decoded as the gateway's HTTP+JSON client decodes them.
    fn events(sse: &str) -> Vec<StreamEvent> {
        sse.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| decode_frame(d).unwrap())
            .collect()
    }

    fn message(text: &str) -> Value {
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}})
    }

    fn states(events: &[StreamEvent]) -> Vec<TaskState> {
        events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::StatusUpdate(u) => Some(u.status.state.clone()),
                StreamEvent::Task(t) => Some(t.status.state.clone()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_stream_and_the_task_it_leaves_under_any_tenant() {
        let app = super::super::router("http://127.0.0.1:1/".into());
        let (status, sse) = call(&app, "POST", "/message:stream", Some(message("echo a b"))).await;
        assert_eq!(status, 200);
        let events = events(&sse);
        use TaskState::*;
        assert_eq!(
            states(&events),
            [Submitted, Working, Working, Working, Completed]
        );
        let StreamEvent::Task(task) = &events[0] else {
            panic!("{events:?}")
        };
        let (status, body) = call(
            &app,
            "GET",
            &format!("/acme/tasks/{}?historyLength=1", task.id),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let got: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(got["history"].as_array().unwrap().len(), 1);
        let (_, listed) = call(&app, "GET", "/tasks?pageSize=1", None).await;
        let listed: Value = serde_json::from_str(&listed).unwrap();
        assert_eq!(listed["tasks"][0]["id"], task.id.as_str());
        assert_eq!(
            (listed["pageSize"].as_u64(), listed["totalSize"].as_u64()),
            (Some(1), Some(1))
        );
    }

    #[tokio::test]
    async fn an_approval_is_answered_and_cancel_and_subscribe_are_actions() {
        let app = super::super::router("http://127.0.0.1:1/".into());
        let (_, body) = call(&app, "POST", "/message:send", Some(message("approve"))).await;
        let sent: Value = serde_json::from_str(&body).unwrap();
        let id = sent["task"]["id"].as_str().unwrap().to_owned();
        assert_eq!(sent["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        // A subscription (GET, as the proto annotates it) sees the snapshot, then the end:
        // its answer's head means it is subscribed.
        let req = axum::http::Request::get(format!("/tasks/{id}:subscribe"))
            .header(crate::demo::A2A_VERSION, "1.0")
            .body(axum::body::Body::empty())
            .unwrap();
        let subscribed = app.clone().oneshot(req).await.unwrap();
        assert_eq!(subscribed.status(), 200);
        let (status, body) = call(
            &app,
            "POST",
            &format!("/tasks/{id}:cancel"),
            Some(json!({})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let sse = subscribed.into_body().collect().await.unwrap().to_bytes();
        let sse = String::from_utf8(sse.to_vec()).unwrap();
        let seen = states(&events(&sse));
        assert_eq!(seen.first(), Some(&TaskState::InputRequired), "{sse}");
        assert_eq!(seen.last(), Some(&TaskState::Canceled), "{sse}");
        // Once canceled: not cancelable again, not subscribable.
        let (status, body) = call(
            &app,
            "POST",
            &format!("/tasks/{id}:cancel"),
            Some(json!({})),
        )
        .await;
        assert_eq!(
            error_of(status, body.as_bytes()).map(|e| e.code),
            Some(rpc_code::TASK_NOT_CANCELABLE)
        );
        let (status, body) = call(
            &app,
            "POST",
            &format!("/tasks/{id}:subscribe"),
            Some(json!({})),
        )
        .await;
        assert_eq!(
            error_of(status, body.as_bytes()).map(|e| e.code),
            Some(rpc_code::UNSUPPORTED_OPERATION)
        );
        let (status, body) =
            call(&app, "POST", &format!("/tasks/{id}:pause"), Some(json!({}))).await;
        assert_eq!(
            error_of(status, body.as_bytes()).map(|e| e.code),
            Some(rpc_code::METHOD_NOT_FOUND)
        );
    }

    /// Failures are the table's status with a `google.rpc.Status` naming the error: what the
    /// gateway's client maps back to the same JSON-RPC code.
    #[tokio::test]
    async fn failures_name_their_a2a_error() {
        let app = super::super::router("http://127.0.0.1:1/".into());
        let code = |(status, body): (u16, String)| {
            let e = error_of(status, body.as_bytes());
            assert!(
                body.contains(errors::ERROR_INFO_TYPE) && e.is_some(),
                "{status} {body}"
            );
            (status, e.unwrap().code)
        };
        assert_eq!(
            code(call(&app, "GET", "/tasks/nope", None).await),
            (404, rpc_code::TASK_NOT_FOUND)
        );
        assert_eq!(
            code(call(&app, "POST", "/message:stream", Some(message(" "))).await),
            (400, rpc_code::INVALID_PARAMS)
        );
        assert_eq!(
            code(call(&app, "GET", "/tasks?pageToken=x", None).await),
            (400, rpc_code::INVALID_PARAMS)
        );
        assert_eq!(
            code(call(&app, "GET", "/tasks?historyLength=-1", None).await),
            (400, rpc_code::INVALID_PARAMS)
        );
        let not_json = axum::http::Request::post("/message:send")
            .header(crate::demo::A2A_VERSION, "1.0")
            .body(axum::body::Body::from("{"))
            .unwrap();
        let resp = app.clone().oneshot(not_json).await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            code((status, String::from_utf8(body.to_vec()).unwrap())),
            (400, rpc_code::INVALID_REQUEST)
        );
        let unversioned = axum::http::Request::get("/tasks")
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = app.clone().oneshot(unversioned).await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            code((status, String::from_utf8(body.to_vec()).unwrap())),
            (400, rpc_code::VERSION_NOT_SUPPORTED)
        );
    }
}
