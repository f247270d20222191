//! The demo agent's JSON-RPC binding: one `POST /` per call, A2A 1.0 and 0.3 on the same
//! URL — the method name picks the version (the method table is
//! [`Operation::of_method`]), and like a2a-sdk 1.3.0 a 1.0 method needs `A2A-Version: 1.x`
//! and a 0.3 method must not have it. Results and stream frames are the JSON objects of
//! [`super::wire`] in the JSON-RPC envelope; failures are JSON-RPC `error` objects with the
//! code itself.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{wire, Failure, Sent, Shared};
use crate::a2a::model::ProtocolVersion;
use crate::a2a::{rpc_code, Operation};

/// `POST /`: one JSON-RPC call.
pub(super) async fn endpoint(
    State(demo): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return error(
            &Value::Null,
            &Failure::new(rpc_code::PARSE_ERROR, "Parse error"),
        );
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let params = req.get("params").cloned().unwrap_or(json!({}));
    let Some((version, op)) = Operation::of_method(method) else {
        let unknown = Failure::new(rpc_code::METHOD_NOT_FOUND, "Method not found");
        return error(&id, &unknown);
    };
    let v1_header = super::asks_v1(
        headers
            .get(super::A2A_VERSION)
            .and_then(|h| h.to_str().ok()),
    );
    if (version == ProtocolVersion::V1) != v1_header {
        let msg = format!("A2A version header does not match method {method}");
        return error(&id, &Failure::new(rpc_code::VERSION_NOT_SUPPORTED, &msg));
    }
    match call(&demo, version, &id, op, &params).await {
        Ok(response) => response,
        Err(failure) => error(&id, &failure),
    }
}

async fn call(
    demo: &Shared,
    v: ProtocolVersion,
    id: &Value,
    op: Operation,
    params: &Value,
) -> Result<Response, Failure> {
    let task_id = || {
        params
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Ok(match op {
        Operation::Stream => match super::send(demo, wire::incoming(params))? {
            Sent::Reply(r) => {
                wire::sse(futures::stream::iter([result(id, wire::reply_json(v, &r))]))
            }
            Sent::Turn(feed) => {
                let id = id.clone();
                wire::sse(feed.encoded(move |e| result(&id, wire::event_json(v, e))))
            }
        },
        Operation::Send => {
            let answer = super::send_blocking(demo, wire::incoming(params)).await?;
            Json(result(id, wire::answer_json(v, &answer))).into_response()
        }
        Operation::GetTask => {
            let task = super::get_task(demo, &task_id(), wire::history_length(params))?;
            Json(result(id, wire::task_json(v, &task))).into_response()
        }
        Operation::CancelTask => {
            let task = super::cancel(demo, &task_id())?;
            Json(result(id, wire::task_json(v, &task))).into_response()
        }
        Operation::Subscribe => {
            let feed = super::subscribe(demo, &task_id())?;
            let id = id.clone();
            wire::sse(feed.encoded(move |e| result(&id, wire::event_json(v, e))))
        }
        Operation::ListTasks => {
            let page = super::list(demo, &wire::list_query(params))?;
            Json(result(id, wire::page_json(&page))).into_response()
        }
        // The demo serves no extended card (its card does not declare one).
        Operation::ExtendedCard => {
            return Err(Failure::new(
                rpc_code::UNSUPPORTED_OPERATION,
                "the demo agent has no extended card",
            ))
        }
        // Its card does not declare push notifications.
        Operation::SetPushConfig => {
            return Err(Failure::new(
                rpc_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
                "the demo agent sends no push notifications",
            ))
        }
    })
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: &Value, f: &Failure) -> Response {
    Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": f.code, "message": f.message}}))
        .into_response()
}
