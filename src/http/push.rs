//! `POST /a2a/push/{agent}` (docs/design.md#the-live-inbox): A2A push notifications, an open
//! route whose credential is the task's token. Thin: what a push may be and how its token
//! is checked is `crate::push`; what it changes is the inbox's.
//!
//! Every refusal but two is the same `401 unauthorized` (unknown agent, push off for it, no
//! token, a body that does not parse, a task without registration, a wrong token), so a
//! caller learns nothing of agents, tasks or tokens; each is counted by its reason
//! (`agui_gateway_push_received_total{result}`). The two: `413 body_too_large` above
//! `push.max_body_bytes`, `429 rate_limited` (with `Retry-After`) above
//! `push.max_per_second` per agent. The body is read at most `push.max_body_bytes`, within
//! `timeouts.body_read`.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use serde_json::{json, Value};

use crate::app::state::AppState;
use crate::config::PushChoice;
use crate::error::{Rejection, RequestError};
use crate::ids::TaskId;
use crate::inbox::book::Observation;
use crate::metrics::inbox::{PushResult, UNKNOWN_AGENT};
use crate::push;

/// `POST /a2a/push/{agent}`.
pub(crate) async fn receive(
    State(s): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, RequestError> {
    let m = &s.metrics.inbox;
    let refuse = |agent: &str, why: PushResult| {
        m.push(agent, why);
        RequestError::Unauthorized(Rejection::Invalid)
    };
    let Some(agent) = s.registry.get(&name) else {
        return Err(refuse(UNKNOWN_AGENT, PushResult::UnknownAgent));
    };
    let name = agent.settings.name.as_str();
    if !s.push.enabled || agent.settings.push == PushChoice::Off {
        return Err(refuse(name, PushResult::PushOff));
    }
    if let Err(secs) = s.push_limiter.check(name) {
        m.push(name, PushResult::RateLimited);
        return Err(RequestError::PushRateLimited(secs));
    }
    let limit = s.push.max_body_bytes;
    let read = tokio::time::timeout(s.timeouts.body_read(), axum::body::to_bytes(body, limit));
    let body = match read.await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => {
            let e = super::body_error(&e, limit);
            if matches!(e, RequestError::BodyTooLarge(_)) {
                m.push(name, PushResult::TooLarge);
                return Err(RequestError::PushTooLarge(limit));
            }
            return Err(refuse(name, PushResult::Malformed));
        }
        Err(_) => return Err(RequestError::BodyTimeout(s.timeouts.body_read())),
    };
    let Some(token) = push::presented_token(&headers) else {
        return Err(refuse(name, PushResult::MissingToken));
    };
    let Some(event) = push::parse(&body) else {
        return Err(refuse(name, PushResult::Malformed));
    };
    let Some(task_id) = event.task_id().map(TaskId::new) else {
        return Err(refuse(name, PushResult::Malformed));
    };
    let Some(registered) = s.store.push_token(name, &task_id).await else {
        return Err(refuse(name, PushResult::UnknownTask));
    };
    if !push::matches(token, &registered) {
        return Err(refuse(name, PushResult::WrongToken));
    }
    m.push(name, PushResult::Accepted);
    if let Some(update) = Observation::of_event(&event) {
        s.inbox.update(name, &update).await;
    }
    Ok(Json(json!({})))
}
