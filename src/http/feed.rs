//! `GET /threads/events` (docs/design.md#the-live-inbox): the caller's inbox as a change
//! feed in SSE. `event: snapshot` `{"threads": [...], "unavailable"?: [...]}` (the items of
//! `GET /threads`), then `event: thread` with one item per change, each with an `id:`; a
//! `Last-Event-ID` the inbox can resume from opens with the changes missed instead of a
//! snapshot. A subscriber that falls `inbox.subscriber_buffer` changes behind gets `event:
//! error` `{"code": "subscriber_too_slow", ...}` and the stream closes; a `: keep-alive`
//! comment goes out after each `stream::KEEP_ALIVE` of silence. Same auth and ownership
//! filter as `GET /threads`; the subscriber bounds are checked before the stream (`429
//! too_many_subscribers`).

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use bytes::Bytes;
use serde_json::json;

use crate::app::state::AppState;
use crate::auth::Caller;
use crate::error::RequestError;
use crate::inbox::{Next, Opening, Subscription};

/// The `code` of the `event: error` a subscriber that fell behind gets.
pub(crate) const TOO_SLOW: &str = "subscriber_too_slow";

/// One SSE frame.
fn frame(event: &str, id: Option<&str>, data: &serde_json::Value) -> Bytes {
    let mut out = format!("event: {event}\n");
    if let Some(id) = id {
        out.push_str(&format!("id: {id}\n"));
    }
    out.push_str(&format!("data: {data}\n\n"));
    Bytes::from(out)
}

/// The frames a subscription opens with.
fn opening(o: Opening) -> Bytes {
    match o {
        Opening::Snapshot {
            threads,
            unavailable,
            id,
        } => {
            let mut data = json!({ "threads": threads });
            if !unavailable.is_empty() {
                data["unavailable"] = json!(unavailable);
            }
            frame("snapshot", Some(&id), &data)
        }
        Opening::Resume(changes) => {
            let mut out = Vec::new();
            for (id, item) in changes {
                out.extend_from_slice(&frame("thread", Some(&id), &json!(item)));
            }
            // At least a comment, so the client sees the stream open.
            out.extend_from_slice(b": resumed\n\n");
            Bytes::from(out)
        }
    }
}

/// `GET /threads/events`.
pub(crate) async fn events(
    State(s): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
) -> Result<Response, RequestError> {
    let last_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() <= 64);
    // The agents' first shared read, never one of this request's own.
    s.inbox.first_reads(s.timeouts.upstream_call()).await;
    let (subscription, open) = s
        .inbox
        .subscribe(&caller, last_id)
        .map_err(|full| RequestError::TooManySubscribers(full.key()))?;
    struct Feed {
        subscription: Subscription,
        caller: Caller,
        first: Option<Bytes>,
        done: bool,
        stop: tokio::sync::watch::Receiver<bool>,
    }
    let feed = Feed {
        subscription,
        caller,
        first: Some(opening(open)),
        done: false,
        stop: s.stop.clone(),
    };
    let stream = futures::stream::unfold(feed, |mut f| async move {
        if f.done {
            return None;
        }
        if let Some(first) = f.first.take() {
            return Some((Ok::<_, std::convert::Infallible>(first), f));
        }
        let frame = tokio::select! {
            next = f.subscription.next(&f.caller) => match next {
                Next::Change(id, item) => frame("thread", Some(&id), &json!(item)),
                Next::Overrun => {
                    f.done = true;
                    frame("error", None, &json!({"code": TOO_SLOW,
                        "message": "this subscriber fell inbox.subscriber_buffer changes behind; reconnect for a fresh snapshot"}))
                }
                Next::End => return None,
            },
            _ = tokio::time::sleep(super::stream::KEEP_ALIVE) => Bytes::from_static(b": keep-alive\n\n"),
            _ = f.stop.wait_for(|s| *s) => return None,
        };
        Some((Ok(frame), f))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}
