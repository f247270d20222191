//! The JSON bindings' transport (JSON-RPC and HTTP+JSON): a call's HTTP request built by
//! reqwest and sent by it, or, for streams, by [`crate::a2a::direct`]; a non-2xx answer as
//! the error it is ([`Refusal::of_http`], else what the binding reads in its body); bodies
//! read within their bounds; answers and stream frames read by the binding's codec. It
//! never asks which binding it carries: what differs is the call's [`JsonCodec`]
//! ([`crate::a2a::jsonrpc::JsonRpc`], [`crate::a2a::rest::HttpJson`]). What every call
//! shares is the client's ([`super::Client`]).

use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};

use super::{head_within, Client, ClientError, EventStream, Sending, A2A_VERSION, MAX_ERROR_BODY};
use crate::a2a::call::{Answer, HttpRequest, JsonCodec};
use crate::a2a::errors::Refusal;
use crate::a2a::model::ProtocolVersion;
use crate::a2a::sse::{self, SseError};
use crate::a2a::Operation;

/// A JSON binding's call: its HTTP request, and the binding's codec that reads what answers
/// it.
pub(super) struct JsonCall {
    pub(super) request: HttpRequest,
    pub(super) codec: &'static dyn JsonCodec,
}

/// How long a call may take.
#[derive(Debug, Clone, Copy)]
pub(super) enum Bound {
    /// The whole exchange.
    Unary(Duration),
    /// The response head, if bounded; events are the caller's to time.
    Stream(Option<Duration>),
}

impl Client {
    /// A unary call of a JSON binding: its answer, the body read within `timeout`.
    pub(super) async fn http_unary(
        &self,
        sending: Sending<'_>,
        op: Operation,
        call: JsonCall,
        timeout: Duration,
    ) -> Result<Answer, ClientError> {
        let codec = call.codec;
        let bound = Bound::Unary(timeout);
        let resp = self
            .call_traced(sending, |headers, trace| {
                self.send_http(call, bound, headers, trace)
            })
            .await?;
        let body = read_limited(resp, self.max_event_bytes, Some(timeout)).await?;
        let version = self.endpoint.version;
        codec.answer(op, version, &String::from_utf8_lossy(&body))
    }

    /// A streaming call of a JSON binding: over [`crate::a2a::direct`] when this client reads its
    /// streams itself, else reqwest's.
    pub(super) async fn http_stream(
        &self,
        sending: Sending<'_>,
        call: JsonCall,
        head_timeout: Option<Duration>,
    ) -> Result<EventStream, ClientError> {
        if let Some(connect_timeout) = self.direct_streams {
            if matches!(self.endpoint.url.scheme(), "http" | "https") {
                return self
                    .direct_stream(sending, call, head_timeout, connect_timeout)
                    .await;
            }
        }
        let codec = call.codec;
        let bound = Bound::Stream(head_timeout);
        let resp = self
            .call_traced(sending, |headers, trace| {
                self.send_http(call, bound, headers, trace)
            })
            .await?;
        let content_type = resp.headers().get(CONTENT_TYPE);
        if !is_event_stream(content_type.and_then(|v| v.to_str().ok())) {
            let body = read_limited(resp, self.max_event_bytes, None).await?;
            return self.single_event(codec, &body);
        }
        Ok(self.events_of(codec, resp.bytes_stream()))
    }

    /// Sends one HTTP request; a non-2xx answer is an error ([`Client::refusal`]).
    async fn send_http(
        &self,
        call: JsonCall,
        bound: Bound,
        headers: HeaderMap,
        trace_headers: HeaderMap,
    ) -> Result<reqwest::Response, ClientError> {
        let codec = call.codec;
        let (req, head_timeout) = self.build(call, bound, headers, trace_headers);
        let resp = head_within(head_timeout, req.send())
            .await?
            .map_err(|e| self.failure(&e, head_timeout))?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body = read_limited(resp, self.error_body_limit(), None);
            return Err(self.refusal(codec, status, async { body.await.ok() }).await);
        }
        Ok(resp)
    }

    /// A transport error of this endpoint as a [`ClientError`]: a refused TLS handshake by
    /// its reason ([`crate::a2a::tls::AgentTls::explain`]), else as [`failure`] says.
    fn failure(&self, e: &reqwest::Error, timeout: Option<Duration>) -> ClientError {
        match self.tls.explain(e) {
            Some(reason) => ClientError::Unavailable(format!("{reason} ({})", self.endpoint_url())),
            None => failure(e, timeout),
        }
    }

    /// How much of an error body is read: [`MAX_ERROR_BODY`] within
    /// `limits.max_event_bytes`.
    fn error_body_limit(&self) -> usize {
        MAX_ERROR_BODY.min(self.max_event_bytes)
    }

    /// A non-2xx answer as an error: a refusal of the credentials ([`Refusal::of_http`]);
    /// else the A2A error its body names where the binding's bodies name one
    /// ([`JsonCodec::error_body`], HTTP+JSON's), the body read within
    /// [`Client::error_body_limit`] and `timeouts.upstream_call`; else its status and our
    /// own words (JSON-RPC's body is not read). The body is never shown.
    async fn refusal(
        &self,
        codec: &dyn JsonCodec,
        status: reqwest::StatusCode,
        body: impl std::future::Future<Output = Option<Vec<u8>>>,
    ) -> ClientError {
        if let Some(refusal) = Refusal::of_http(status.as_u16(), &self.endpoint_url()) {
            return ClientError::Unauthorized(refusal);
        }
        if let Some(error_of) = codec.error_body() {
            if let Ok(Some(body)) = tokio::time::timeout(self.call_timeout, body).await {
                if let Some(e) = error_of(status.as_u16(), &body) {
                    return ClientError::Rpc(e);
                }
            }
        }
        ClientError::Unavailable(format!("HTTP {status} from {}", self.endpoint_url()))
    }

    /// The HTTP request of a call with `headers`, and the bound of its response head.
    pub(super) fn build(
        &self,
        call: JsonCall,
        bound: Bound,
        headers: HeaderMap,
        trace_headers: HeaderMap,
    ) -> (reqwest::RequestBuilder, Option<Duration>) {
        let accept = match bound {
            Bound::Stream(_) => "text/event-stream",
            Bound::Unary(_) => call.codec.accept(),
        };
        let HttpRequest { method, url, body } = call.request;
        let mut req = self
            .http
            .request(method, url)
            .headers(headers)
            .headers(trace_headers)
            .header(ACCEPT, accept);
        // Content-Type application/json: what every JSON-RPC server and both SDKs' HTTP+JSON
        // routes accept (1.0.1's application/a2a+json is newer than some servers).
        if let Some(body) = &body {
            req = req.json(body);
        }
        // A2A 1.0 §3.6: the version header on every call; 0.3 servers expect none.
        if self.endpoint.version == ProtocolVersion::V1 {
            req = req.header(A2A_VERSION, HeaderValue::from_static("1.0"));
        }
        let head_timeout = match bound {
            Bound::Unary(t) => {
                req = req.timeout(t);
                Some(t)
            }
            Bound::Stream(t) => t,
        };
        (req, head_timeout)
    }

    /// A streaming call answered without SSE: errors detected before the first event come
    /// back as plain JSON (a2a-sdk 1.3.0, transcripts §2.16, §3.11); a non-streaming server
    /// may also answer a single result.
    fn single_event(&self, codec: &dyn JsonCodec, body: &[u8]) -> Result<EventStream, ClientError> {
        let event = codec.frame(self.endpoint.version, &String::from_utf8_lossy(body))?;
        Ok(Box::pin(futures::stream::iter([Ok(event)])))
    }

    /// The events of an SSE `body`, each decoded where the SSE reader holds it (no copy of
    /// its data).
    fn events_of<S, E>(&self, codec: &'static dyn JsonCodec, body: S) -> EventStream
    where
        S: Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
        E: std::fmt::Display + 'static,
    {
        let version = self.endpoint.version;
        let decode = move |_event: Option<&str>, data: &str| codec.frame(version, data);
        let frames = sse::frames(body, self.max_event_bytes, decode);
        Box::pin(frames.map(|frame| match frame {
            Err(SseError::TooLarge { limit }) => Err(ClientError::EventTooLarge { limit }),
            Err(e) => Err(stream_broke(e)),
            Ok(decoded) => decoded,
        }))
    }

    /// [`Client::http_stream`] over [`crate::a2a::direct`]: the same request, read by the
    /// caller's task.
    async fn direct_stream(
        &self,
        sending: Sending<'_>,
        call: JsonCall,
        head_timeout: Option<Duration>,
        connect_timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        let codec = call.codec;
        let send =
            |headers, trace| self.send_direct(call, headers, head_timeout, connect_timeout, trace);
        let mut resp = self.call_traced(sending, send).await?;
        if !is_event_stream(resp.content_type.as_deref()) {
            let limit = self.max_event_bytes;
            let body = match resp.body.read_to_end(limit).await.map_err(stream_broke)? {
                Some(body) => body,
                None => return Err(ClientError::EventTooLarge { limit }),
            };
            return self.single_event(codec, &body);
        }
        let body = futures::stream::unfold(Some(resp.body), |body| async move {
            let mut body = body?;
            match body.next_bytes().await {
                Ok(Some(bytes)) => Some((Ok(bytes), Some(body))),
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        });
        Ok(self.events_of(codec, Box::pin(body)))
    }

    /// Sends a streaming call over [`crate::a2a::direct`]; its response head within
    /// `head_timeout` when bounded.
    async fn send_direct(
        &self,
        call: JsonCall,
        headers: HeaderMap,
        head_timeout: Option<Duration>,
        connect_timeout: Duration,
        trace_headers: HeaderMap,
    ) -> Result<crate::a2a::direct::Response, ClientError> {
        let codec = call.codec;
        let bound = Bound::Stream(head_timeout);
        let (req, head_timeout) = self.build(call, bound, headers, trace_headers);
        let request = req
            .build()
            .map_err(|e| ClientError::Unavailable(describe(&e)))?;
        let send = crate::a2a::direct::send(&request, &self.tls, connect_timeout);
        let resp = head_within(head_timeout, send)
            .await?
            .map_err(|e| ClientError::Unavailable(format!("{e} ({})", self.endpoint_url())))?;
        let status = reqwest::StatusCode::from_u16(resp.status)
            .map_err(|_| ClientError::Invalid("a malformed HTTP status".into()))?;
        if !status.is_success() {
            let mut resp = resp;
            let limit = self.error_body_limit();
            let body = async move { resp.body.read_to_end(limit).await.ok().flatten() };
            return Err(self.refusal(codec, status, body).await);
        }
        Ok(resp)
    }
}

/// True if a response's content type is SSE.
fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| ct.starts_with("text/event-stream"))
}

/// An upstream stream that broke off.
fn stream_broke(e: impl std::fmt::Display) -> ClientError {
    ClientError::Unavailable(format!("upstream stream broke: {e}"))
}

/// A transport error as a [`ClientError`]: reqwest's timeout of a call bounded by
/// `timeout` is a [`ClientError::Timeout`].
fn failure(e: &reqwest::Error, timeout: Option<Duration>) -> ClientError {
    match timeout {
        Some(t) if e.is_timeout() => ClientError::Timeout(t),
        _ => ClientError::Unavailable(describe(e)),
    }
}

/// Reads a whole response body, refusing more than `limit` bytes (never buffering past it);
/// `timeout` is the bound the request was sent with, if any.
pub async fn read_limited(
    mut resp: reqwest::Response,
    limit: usize,
    timeout: Option<Duration>,
) -> Result<Vec<u8>, ClientError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| failure(&e, timeout))? {
        if body.len() + chunk.len() > limit {
            return Err(ClientError::EventTooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A reqwest error with its causes ("connection refused" is in the source chain), its URL
/// without userinfo; a refused TLS handshake by its reason ([`crate::a2a::tls::explain`]).
pub fn describe(e: &reqwest::Error) -> String {
    use std::error::Error;
    if let Some(reason) = crate::a2a::tls::explain(e) {
        return match e.url() {
            Some(url) => format!("{reason} ({})", crate::redact::url(url)),
            None => reason,
        };
    }
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    match e.url() {
        Some(url) => crate::redact::url_in(&msg, url),
        None => msg,
    }
}
