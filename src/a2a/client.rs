//! The A2A client: one [`Client`] per upstream endpoint, both protocol versions, the
//! JSON-RPC and HTTP+JSON bindings ([`super::rest`]); every caller (runs, thread reads,
//! CopilotKit connect and stop, cancels) calls the same operations whichever binding the
//! card selected, and gets the same model and the same errors back ([`super::errors`]).
//!
//! Lenient where upstreams are sloppy (docs/design.md#6-projection-a2a-to-ag-ui): a streaming call
//! may be answered with
//! plain JSON (a JSON-RPC error before the stream starts, or a single result), SSE may use
//! CRLF and `:` comment frames, and errors inside a stream come as `event: error` frames (1.0)
//! or plain `data:` frames (0.3). Every 1.0 call carries `A2A-Version: 1.0` (a2a-sdk treats a
//! missing header as 0.3 and answers -32009).
//!
//! Hostile upstreams (docs/design.md#9-reliability-and-limits): every unary call and the response
//! head of a subscription
//! are bounded by `timeouts.upstream_call` (the first event of a new message stream is the
//! caller's `first_event`; the time between events its `idle`); bodies are read with a size
//! bound; an upstream's response body is never echoed (errors carry a status and a short
//! reason of our own, or the A2A error an HTTP+JSON error body names, read within
//! [`MAX_ERROR_BODY`] and `timeouts.upstream_call`); URLs in messages lose their userinfo
//! ([`crate::redact`]).
//!
//! Transport: every call is built by reqwest; unary calls are sent by it, streams by
//! `a2a::direct` (read in the caller's task, over TLS for `https://`; see its header for
//! why) unless a proxy is configured. Both stream paths share what follows the head
//! (`Client::events_of`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};

use super::call_headers::CallHeaders;
use super::card::Binding;
use super::model::{OutgoingMessage, ProtocolVersion, RpcError, StreamEvent, Task, TaskPage};
use super::sse::{self, SseError};
use super::{parse_envelope, request_body, rest, Operation, RpcReply};

/// `A2A-Version` (A2A 1.0 §3.6), on every 1.0 call.
const A2A_VERSION: HeaderName = HeaderName::from_static("a2a-version");

/// A gRPC call's deadline (tonic sets it from the request's timeout).
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// The headers the gateway sets itself on upstream calls, whatever the configuration says:
/// the transport's framing, the body's type and what is accepted, the A2A version, the
/// extensions asked for (both versions' names), the call's trace context, and a gRPC
/// call's deadline (`grpc-timeout`). Nothing
/// configured may carry another meaning in them (`forward_identity`, `crate::config`).
pub(crate) fn owned_headers() -> impl Iterator<Item = HeaderName> {
    crate::http1::FRAMING_HEADERS
        .into_iter()
        .chain([CONTENT_TYPE, ACCEPT, A2A_VERSION, GRPC_TIMEOUT])
        .chain(ProtocolVersion::ALL.map(ProtocolVersion::extensions_header))
        .chain(crate::telemetry::TRACE_HEADERS)
}

/// The most of an HTTP+JSON error body read to learn which A2A error it names (a
/// `google.rpc.Status` is small; past this the status alone is reported).
pub const MAX_ERROR_BODY: usize = 64 * 1024;

// Defined where the other bindings' code reaches them without an import circle (the gRPC
// transport is below this client): the error with the one error table, the stream with the
// errors that end it.
pub use super::errors::ClientError;
pub use super::errors::EventStream;

/// Where and how to reach one upstream agent.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: url::Url,
    pub version: ProtocolVersion,
    pub binding: Binding,
    /// Sent on every 1.0 call (A2A 1.0 §4.4): the HTTP+JSON path segment, the JSON-RPC
    /// request field.
    pub tenant: Option<String>,
    /// Static headers from config (already resolved from their references).
    pub headers: HeaderMap,
}

impl Endpoint {
    /// A JSON-RPC endpoint without a tenant.
    pub fn json_rpc(url: url::Url, version: ProtocolVersion, headers: HeaderMap) -> Self {
        Self {
            url,
            version,
            binding: Binding::JsonRpc,
            tenant: None,
            headers,
        }
    }
}

/// An A2A client for one endpoint.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    endpoint: Endpoint,
    max_event_bytes: usize,
    /// `timeouts.upstream_call`.
    call_timeout: Duration,
    /// Told of every call's method and result (the gateway's metrics).
    on_call: Option<CallHook>,
    /// The run whose calls these are, when traces are on (docs/design.md#10-observability).
    trace: Option<crate::telemetry::RunTrace>,
    /// Streams from an `http://` endpoint are read by [`super::direct`] (connecting within
    /// this bound) rather than reqwest; `None`: every call goes through reqwest.
    direct_streams: Option<Duration>,
    /// The gRPC binding's channel (unused by the others).
    grpc: super::grpc::Transport,
    /// Headers decided per call (credentials that change), if any.
    call_headers: Option<std::sync::Arc<dyn CallHeaders>>,
    /// The TLS of the connections this client opens itself (direct streams, gRPC); reqwest
    /// carries its own copy ([`super::tls`]).
    tls: super::tls::AgentTls,
}

/// Tells a stream's hook of its end.
struct StreamReport {
    hook: CallHook,
    method: &'static str,
    failed: bool,
}

impl StreamReport {
    fn note(&mut self, failed: bool) {
        self.failed |= failed;
    }
}

impl Drop for StreamReport {
    fn drop(&mut self) {
        (self.hook.0)(self.method, !self.failed);
    }
}

/// A function told of each A2A call: its method (the A2A method name, whichever binding
/// carried it) and whether it succeeded.
#[derive(Clone)]
pub struct CallHook(pub std::sync::Arc<dyn Fn(&'static str, bool) + Send + Sync>);

impl std::fmt::Debug for CallHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallHook")
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Client {
    /// A client sharing the connection pool of `http`.
    pub fn new(
        http: reqwest::Client,
        endpoint: Endpoint,
        max_event_bytes: usize,
        call_timeout: Duration,
    ) -> Self {
        Self {
            http,
            endpoint,
            max_event_bytes,
            call_timeout,
            on_call: None,
            trace: None,
            direct_streams: None,
            grpc: super::grpc::Transport::default(),
            call_headers: None,
            tls: super::tls::AgentTls::default_trust().clone(),
        }
    }

    /// This client opening its own connections (direct streams, gRPC) with `tls`: the
    /// agent's, whose reqwest client was built with it too ([`super::tls::AgentTls::reqwest`]).
    pub fn with_tls(mut self, tls: super::tls::AgentTls) -> Self {
        self.tls = tls;
        self
    }

    /// This client adding `source`'s headers to every call ([`super::call_headers`]), in
    /// place of any source it had.
    pub fn with_call_headers(&self, source: std::sync::Arc<dyn CallHeaders>) -> Client {
        let mut client = self.clone();
        client.call_headers = Some(source);
        client
    }

    /// Runs `call` on a copy of this client carrying the call's changing headers; when the
    /// agent refuses them as stale (a 401), tells the source and runs it once more with
    /// fresh ones ([`super::call_headers`]). Without a source, `call` runs on a plain copy.
    async fn authorized<'a, T, F, Fut>(&'a self, call: F) -> Result<T, ClientError>
    where
        F: Fn(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>> + 'a,
    {
        let Some(source) = &self.call_headers else {
            return call(self.clone()).await;
        };
        let sent = source.headers().await.map_err(ClientError::Credentials)?;
        match call(self.with_headers(&sent)).await {
            Err(ClientError::Unauthorized(refusal)) if refusal.stale => {
                source.refused(&sent);
                let fresh = source.headers().await.map_err(ClientError::Credentials)?;
                call(self.with_headers(&fresh)).await
            }
            other => other,
        }
    }

    /// This client with `headers` set on every call (replacing those of the same name).
    fn with_headers(&self, headers: &HeaderMap) -> Client {
        let mut client = self.clone();
        for (name, value) in headers {
            client.endpoint.headers.insert(name, value.clone());
        }
        client
    }

    /// This client reading its `http://` streams itself (`a2a::direct`), connecting
    /// within `connect_timeout` (`timeouts.connect`).
    pub fn with_direct_streams(mut self, connect_timeout: Duration) -> Self {
        self.direct_streams = Some(connect_timeout);
        self
    }

    /// This client making its calls children of `trace` (a span each, sent upstream as
    /// `traceparent`).
    pub(crate) fn traced(&self, trace: crate::telemetry::RunTrace) -> Client {
        let mut client = self.clone();
        client.trace = Some(trace);
        client
    }

    /// This client telling `hook` of every call.
    pub fn observed(mut self, hook: CallHook) -> Self {
        self.on_call = Some(hook);
        self
    }

    fn observe(&self, method: &'static str, ok: bool) {
        if let Some(hook) = &self.on_call {
            (hook.0)(method, ok);
        }
    }

    /// This client with one more header on every call (`forward_identity`): a cheap copy
    /// sharing the connection pool.
    pub fn with_header(&self, name: HeaderName, value: HeaderValue) -> Self {
        let mut client = self.clone();
        client.endpoint.headers.insert(name, value);
        client
    }

    /// The endpoint URL in use (the interface URL), without userinfo (for display).
    pub fn endpoint_url(&self) -> String {
        crate::redact::url(&self.endpoint.url)
    }

    /// The endpoint's protocol version.
    pub fn version(&self) -> ProtocolVersion {
        self.endpoint.version
    }

    /// Whether the endpoint's version has `op`: A2A 0.3 has no `ListTasks` (a list there
    /// comes from elsewhere, a pick-up reads nothing), 1.0 has every operation.
    pub fn supports(&self, op: Operation) -> bool {
        self.endpoint.version.method(op).is_some()
    }

    /// The endpoint's binding.
    pub fn binding(&self) -> Binding {
        self.endpoint.binding
    }

    /// The tenant sent on every call, if any.
    pub fn tenant(&self) -> Option<&str> {
        self.endpoint.tenant.as_deref()
    }

    fn method(&self, op: Operation, name: &'static str) -> Result<&'static str, ClientError> {
        self.endpoint
            .version
            .method(op)
            .ok_or(ClientError::Unsupported(
                name,
                self.endpoint.version.as_str(),
            ))
    }

    /// Sends one call. `Call::Unary(t)` bounds the whole exchange by `t`;
    /// `Call::Stream(Some(t))` bounds the response head only (events are the caller's).
    async fn send(
        &self,
        op: Operation,
        method: &'static str,
        params: serde_json::Value,
        call: Call,
    ) -> Result<reqwest::Response, ClientError> {
        let wire = self.wire(op, method, params)?;
        self.call_traced(method, |headers| self.send_wire(wire, call, headers))
            .await
    }

    /// The request of `op` with `params` as the endpoint's binding spells it, the tenant
    /// in it (A2A 1.0 §4.4: a request field, the HTTP+JSON path segment; 0.3 has none).
    fn wire(
        &self,
        op: Operation,
        method: &'static str,
        mut params: serde_json::Value,
    ) -> Result<rest::Request, ClientError> {
        if let (Some(tenant), ProtocolVersion::V1) = (&self.endpoint.tenant, self.endpoint.version)
        {
            params["tenant"] = serde_json::Value::from(tenant.as_str());
        }
        match self.endpoint.binding {
            Binding::JsonRpc => Ok(rest::Request {
                method: reqwest::Method::POST,
                url: self.endpoint.url.clone(),
                body: Some(request_body(
                    NEXT_ID.fetch_add(1, Ordering::Relaxed),
                    method,
                    params,
                )),
            }),
            Binding::HttpJson => {
                rest::request(&self.endpoint.url, op, params).map_err(|e| match e {
                    // No task can have that id on this upstream.
                    rest::Unaddressable::TaskId => ClientError::Rpc(RpcError {
                        code: super::rpc_code::TASK_NOT_FOUND,
                        message: "the task id cannot be an HTTP+JSON path segment".into(),
                        data: None,
                    }),
                    rest::Unaddressable::Tenant => ClientError::Invalid(
                        "the tenant cannot be an HTTP+JSON path segment".into(),
                    ),
                })
            }
            // Not built from params: each operation builds its message (`Client::grpc`).
            Binding::Grpc => Err(ClientError::Unsupported("a JSON request", "GRPC")),
        }
    }

    /// docs/design.md#10-observability: a span per upstream call around `send(headers)`, its
    /// context sent upstream
    /// as `traceparent` in `headers` (none when traces are off).
    async fn call_traced<T, F>(
        &self,
        method: &'static str,
        send: impl FnOnce(HeaderMap) -> F,
    ) -> Result<T, ClientError>
    where
        F: std::future::Future<Output = Result<T, ClientError>>,
    {
        let Some(trace) = &self.trace else {
            return send(HeaderMap::new()).await;
        };
        let (headers, span) = trace.call(method, self.endpoint.binding.as_str());
        let result = send(headers).await;
        span.end(result.is_ok());
        result
    }

    async fn send_wire(
        &self,
        wire: rest::Request,
        call: Call,
        trace_headers: HeaderMap,
    ) -> Result<reqwest::Response, ClientError> {
        let (req, head_timeout) = self.build(wire, call, trace_headers);
        let resp = head_within(head_timeout, req.send())
            .await?
            .map_err(|e| self.failure(&e, head_timeout))?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body = read_limited(resp, self.error_body_limit(), None);
            return Err(self.refusal(status, async { body.await.ok() }).await);
        }
        Ok(resp)
    }

    /// A transport error of this endpoint as a [`ClientError`]: a refused TLS handshake by
    /// its reason ([`super::tls::AgentTls::explain`]), else as [`failure`] says.
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

    /// A non-2xx answer as an error. JSON-RPC: its status and our own words (the body is
    /// not read). HTTP+JSON: the A2A error its body names ([`rest::error_of`]), the body
    /// read within [`Client::error_body_limit`] and `timeouts.upstream_call`; else the
    /// status. The body is never shown.
    async fn refusal(
        &self,
        status: reqwest::StatusCode,
        body: impl std::future::Future<Output = Option<Vec<u8>>>,
    ) -> ClientError {
        if let Some(refusal) = refusal_of(status.as_u16(), &self.endpoint_url()) {
            return ClientError::Unauthorized(refusal);
        }
        if self.endpoint.binding == Binding::HttpJson {
            if let Ok(Some(body)) = tokio::time::timeout(self.call_timeout, body).await {
                if let Some(e) = rest::error_of(status.as_u16(), &body) {
                    return ClientError::Rpc(e);
                }
            }
        }
        ClientError::Unavailable(format!("HTTP {status} from {}", self.endpoint_url()))
    }

    /// The HTTP request of a call, and the bound of its response head.
    fn build(
        &self,
        wire: rest::Request,
        call: Call,
        trace_headers: HeaderMap,
    ) -> (reqwest::RequestBuilder, Option<Duration>) {
        let accept = match (call, self.endpoint.binding) {
            (Call::Stream(_), _) => "text/event-stream",
            // A2A 1.0.1 prefers application/a2a+json; servers of 1.0.0 answer application/json.
            (Call::Unary(_), Binding::HttpJson) => "application/a2a+json, application/json",
            (Call::Unary(_), _) => "application/json",
        };
        let mut req = self
            .http
            .request(wire.method, wire.url)
            .headers(self.endpoint.headers.clone())
            .headers(trace_headers)
            .header(ACCEPT, accept);
        // Content-Type application/json: what every JSON-RPC server and both SDKs' HTTP+JSON
        // routes accept (1.0.1's application/a2a+json is newer than some servers).
        if let Some(body) = &wire.body {
            req = req.json(body);
        }
        // A2A 1.0 §3.6: the version header on every call; 0.3 servers expect none.
        if self.endpoint.version == ProtocolVersion::V1 {
            req = req.header(A2A_VERSION, HeaderValue::from_static("1.0"));
        }
        let head_timeout = match call {
            Call::Unary(t) => {
                req = req.timeout(t);
                Some(t)
            }
            Call::Stream(t) => t,
        };
        (req, head_timeout)
    }

    /// A unary call bounded by `timeout` (default `timeouts.upstream_call`): the result
    /// text (a JSON-RPC response's result, an HTTP+JSON response's body).
    async fn call(
        &self,
        op: Operation,
        method: &'static str,
        params: serde_json::Value,
        timeout: Option<Duration>,
    ) -> Result<String, ClientError> {
        let result = self.call_once(op, method, params, timeout).await;
        self.observe(method, result.is_ok());
        result
    }

    async fn call_once(
        &self,
        op: Operation,
        method: &'static str,
        params: serde_json::Value,
        timeout: Option<Duration>,
    ) -> Result<String, ClientError> {
        let timeout = timeout.unwrap_or(self.call_timeout);
        let resp = self.send(op, method, params, Call::Unary(timeout)).await?;
        let body = read_limited(resp, self.max_event_bytes, Some(timeout)).await?;
        let text = String::from_utf8_lossy(&body);
        if self.endpoint.binding == Binding::HttpJson {
            return match serde_json::from_str::<serde::de::IgnoredAny>(&text) {
                Ok(_) => Ok(text.into_owned()),
                Err(_) => Err(not_a2a(&text)),
            };
        }
        match parse_envelope(&text) {
            Some(RpcReply::Result(r)) => Ok(r.to_owned()),
            Some(RpcReply::Error(e)) => Err(ClientError::Rpc(e)),
            None => Err(not_jsonrpc(&text)),
        }
    }

    /// This client asking, on top of its own, for the extensions `uris` (A2A 1.0 §4.6: the
    /// `A2A-Extensions` header; `X-A2A-Extensions` for 0.3 agents), in one header value.
    pub fn with_extensions(&self, uris: &[String]) -> Client {
        if uris.is_empty() {
            return self.clone();
        }
        let name = self.endpoint.version.extensions_header();
        let mut all: Vec<String> = self
            .endpoint
            .headers
            .get(&name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(',').map(|u| u.trim().to_owned()).collect())
            .unwrap_or_default();
        for uri in uris {
            if !all.contains(uri) {
                all.push(uri.clone());
            }
        }
        match HeaderValue::from_str(&all.join(", ")) {
            Ok(value) => self.with_header(name, value),
            Err(_) => self.clone(),
        }
    }

    /// The client for sending `msg`: asking for the extensions the message uses.
    fn for_message(&self, msg: &OutgoingMessage) -> std::borrow::Cow<'_, Client> {
        if msg.extensions.is_empty() {
            std::borrow::Cow::Borrowed(self)
        } else {
            std::borrow::Cow::Owned(self.with_extensions(&msg.extensions))
        }
    }

    /// `SendStreamingMessage` / `message/stream`.
    pub async fn stream_message(
        &self,
        msg: &OutgoingMessage,
        history_length: Option<u32>,
    ) -> Result<EventStream, ClientError> {
        self.authorized(|c| async move { c.stream_message_once(msg, history_length).await })
            .await
    }

    async fn stream_message_once(
        &self,
        msg: &OutgoingMessage,
        history_length: Option<u32>,
    ) -> Result<EventStream, ClientError> {
        let method = self.method(Operation::Stream, "SendStreamingMessage")?;
        let client = self.for_message(msg);
        // The head may come with the first event: the caller's `first_event` bounds both.
        if self.endpoint.binding == Binding::Grpc {
            let opened = client
                .grpc_stream(method, None, |call| {
                    call.stream_message(msg, history_length)
                })
                .await;
            return client.observed_stream(method, opened);
        }
        let params = self.endpoint.version.send_params(msg, history_length);
        client
            .open_stream(Operation::Stream, method, params, None)
            .await
    }

    /// `SubscribeToTask` / `tasks/resubscribe`; the response head within
    /// `timeouts.upstream_call`.
    pub async fn subscribe(&self, task_id: &str) -> Result<EventStream, ClientError> {
        self.authorized(|c| async move { c.subscribe_once(task_id).await })
            .await
    }

    async fn subscribe_once(&self, task_id: &str) -> Result<EventStream, ClientError> {
        let method = self.method(Operation::Subscribe, "SubscribeToTask")?;
        if self.endpoint.binding == Binding::Grpc {
            let timeout = Some(self.call_timeout);
            let opened = self
                .grpc_stream(method, timeout, |call| call.subscribe(task_id))
                .await;
            return self.observed_stream(method, opened);
        }
        let params = serde_json::json!({ "id": task_id });
        self.open_stream(
            Operation::Subscribe,
            method,
            params,
            Some(self.call_timeout),
        )
        .await
    }

    /// `SendMessage` / `message/send` (blocking): a Task or a Message.
    pub async fn send_message(
        &self,
        msg: &OutgoingMessage,
        history_length: Option<u32>,
        timeout: Option<Duration>,
    ) -> Result<StreamEvent, ClientError> {
        self.authorized(|c| async move { c.send_message_once(msg, history_length, timeout).await })
            .await
    }

    async fn send_message_once(
        &self,
        msg: &OutgoingMessage,
        history_length: Option<u32>,
        timeout: Option<Duration>,
    ) -> Result<StreamEvent, ClientError> {
        let method = self.method(Operation::Send, "SendMessage")?;
        if self.endpoint.binding == Binding::Grpc {
            let client = self.for_message(msg);
            let send = |call: super::grpc::Call| call.send_message(msg, history_length);
            return client.grpc_unary(method, timeout, send).await;
        }
        let params = self.endpoint.version.send_params(msg, history_length);
        let result = self
            .for_message(msg)
            .call(Operation::Send, method, params, timeout)
            .await?;
        Ok(self.endpoint.version.decode_event(&result))
    }

    /// `GetTask` / `tasks/get`.
    pub async fn get_task(
        &self,
        task_id: &str,
        history_length: Option<u32>,
    ) -> Result<Task, ClientError> {
        self.authorized(|c| async move { c.get_task_once(task_id, history_length).await })
            .await
    }

    async fn get_task_once(
        &self,
        task_id: &str,
        history_length: Option<u32>,
    ) -> Result<Task, ClientError> {
        let method = self.method(Operation::GetTask, "GetTask")?;
        if self.endpoint.binding == Binding::Grpc {
            let get = |call: super::grpc::Call| call.get_task(task_id, history_length);
            return self.grpc_unary(method, None, get).await;
        }
        let mut params = serde_json::json!({ "id": task_id });
        if let Some(n) = history_length {
            params["historyLength"] = n.into();
        }
        let result = self.call(Operation::GetTask, method, params, None).await?;
        self.endpoint
            .version
            .decode_task(&result)
            .ok_or_else(|| not_a("Task", &result))
    }

    /// `CancelTask` / `tasks/cancel`.
    pub async fn cancel_task(&self, task_id: &str) -> Result<Task, ClientError> {
        self.authorized(|c| async move { c.cancel_task_once(task_id).await })
            .await
    }

    async fn cancel_task_once(&self, task_id: &str) -> Result<Task, ClientError> {
        let method = self.method(Operation::CancelTask, "CancelTask")?;
        if self.endpoint.binding == Binding::Grpc {
            let cancel = |call: super::grpc::Call| call.cancel_task(task_id);
            return self.grpc_unary(method, None, cancel).await;
        }
        let params = serde_json::json!({ "id": task_id });
        let result = self
            .call(Operation::CancelTask, method, params, None)
            .await?;
        self.endpoint
            .version
            .decode_task(&result)
            .ok_or_else(|| not_a("Task", &result))
    }

    /// `ListTasks`, filtered by context if given (1.0 only; newest first); with the tasks'
    /// artifacts if `include_artifacts`.
    pub async fn list_tasks(
        &self,
        context_id: Option<&str>,
        page_size: u32,
        page_token: Option<&str>,
        history_length: u32,
        include_artifacts: bool,
    ) -> Result<TaskPage, ClientError> {
        self.authorized(|c| async move {
            c.list_tasks_once(
                context_id,
                page_size,
                page_token,
                history_length,
                include_artifacts,
            )
            .await
        })
        .await
    }

    async fn list_tasks_once(
        &self,
        context_id: Option<&str>,
        page_size: u32,
        page_token: Option<&str>,
        history_length: u32,
        include_artifacts: bool,
    ) -> Result<TaskPage, ClientError> {
        let method = self.method(Operation::ListTasks, "ListTasks")?;
        if self.endpoint.binding == Binding::Grpc {
            let list = |call: super::grpc::Call| {
                call.list_tasks(
                    context_id,
                    page_size,
                    page_token,
                    history_length,
                    include_artifacts,
                )
            };
            return self.grpc_unary(method, None, list).await;
        }
        let params = ProtocolVersion::list_params(
            context_id,
            page_size,
            page_token,
            history_length,
            include_artifacts,
        );
        let result = self
            .call(Operation::ListTasks, method, params, None)
            .await?;
        ProtocolVersion::decode_task_page(&result).ok_or_else(|| not_a("task page", &result))
    }

    /// `GetExtendedAgentCard` / `agent/getAuthenticatedExtendedCard`: the card served to
    /// authenticated callers (A2A 1.0 §9.4.7).
    pub async fn get_extended_card(&self) -> Result<super::card::AgentCard, ClientError> {
        self.authorized(|c| async move { c.get_extended_card_once().await })
            .await
    }

    async fn get_extended_card_once(&self) -> Result<super::card::AgentCard, ClientError> {
        let method = self.method(Operation::ExtendedCard, "GetExtendedAgentCard")?;
        if self.endpoint.binding == Binding::Grpc {
            let get = |call: super::grpc::Call| call.get_extended_card();
            return self.grpc_unary(method, None, get).await;
        }
        let result = self
            .call(Operation::ExtendedCard, method, serde_json::json!({}), None)
            .await?;
        serde_json::from_str(&result).map_err(|_| not_a("AgentCard", &result))
    }

    /// `ListTasks` over up to `pages` pages of `page_size` (newest first), all of them within
    /// one `timeouts.upstream_call`. `Err` only if the first page fails; a later failure or
    /// the deadline ends the list with what was read.
    pub async fn list_tasks_paged(
        &self,
        context_id: Option<&str>,
        page_size: u32,
        pages: usize,
        history_length: u32,
        include_artifacts: bool,
    ) -> Result<Vec<Task>, ClientError> {
        let deadline = tokio::time::Instant::now() + self.call_timeout;
        let mut tasks = Vec::new();
        let mut token: Option<String> = None;
        for page_no in 0..pages {
            let call = self.list_tasks(
                context_id,
                page_size,
                token.as_deref(),
                history_length,
                include_artifacts,
            );
            let page = match tokio::time::timeout_at(deadline, call).await {
                Ok(Ok(page)) => page,
                Ok(Err(e)) if page_no == 0 => return Err(e),
                Err(_) if page_no == 0 => return Err(ClientError::Timeout(self.call_timeout)),
                Ok(Err(_)) | Err(_) => break,
            };
            tasks.extend(page.tasks);
            token = page.next_page_token.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
        }
        Ok(tasks)
    }

    async fn open_stream(
        &self,
        op: Operation,
        method: &'static str,
        params: serde_json::Value,
        head_timeout: Option<Duration>,
    ) -> Result<EventStream, ClientError> {
        let opened = self
            .open_stream_once(op, method, params, head_timeout)
            .await;
        self.observed_stream(method, opened)
    }

    /// A stream as opened, its hook told when it ends (or that it failed to open). Takes
    /// the result, not the opening: a future passed into an async fn and awaited there is
    /// held twice in its state (memory per open stream, docs/performance.md).
    fn observed_stream(
        &self,
        method: &'static str,
        opened: Result<EventStream, ClientError>,
    ) -> Result<EventStream, ClientError> {
        let Some(hook) = &self.on_call else {
            return opened;
        };
        let stream = match opened {
            Ok(stream) => stream,
            Err(e) => {
                (hook.0)(method, false);
                return Err(e);
            }
        };
        // A stream is one call: told when it ends, failed if any of its items was an error
        // (an error frame, a broken stream).
        let mut report = StreamReport {
            hook: hook.clone(),
            method,
            failed: false,
        };
        Ok(Box::pin(stream.map(move |item| {
            report.note(item.is_err());
            item
        })))
    }

    async fn open_stream_once(
        &self,
        op: Operation,
        method: &'static str,
        params: serde_json::Value,
        head_timeout: Option<Duration>,
    ) -> Result<EventStream, ClientError> {
        let wire = self.wire(op, method, params)?;
        if let Some(connect_timeout) = self.direct_streams {
            if matches!(self.endpoint.url.scheme(), "http" | "https") {
                return self
                    .open_direct_stream(method, wire, head_timeout, connect_timeout)
                    .await;
            }
        }
        let call = Call::Stream(head_timeout);
        let resp = self
            .call_traced(method, |headers| self.send_wire(wire, call, headers))
            .await?;
        let content_type = resp.headers().get(CONTENT_TYPE);
        if !is_event_stream(content_type.and_then(|v| v.to_str().ok())) {
            let body = read_limited(resp, self.max_event_bytes, None).await?;
            return self.single_event(&body);
        }
        Ok(self.events_of(resp.bytes_stream()))
    }

    /// A streaming call answered without SSE: errors detected before the first event come
    /// back as plain JSON (a2a-sdk 1.3.0, transcripts §2.16, §3.11); a non-streaming server
    /// may also answer a single result.
    fn single_event(&self, body: &[u8]) -> Result<EventStream, ClientError> {
        let event = decode_data(
            self.endpoint.binding,
            self.endpoint.version,
            &String::from_utf8_lossy(body),
        )?;
        Ok(Box::pin(futures::stream::iter([Ok(event)])))
    }

    /// The events of an SSE `body`, each decoded where the SSE reader holds it (no copy of
    /// its data).
    fn events_of<S, E>(&self, body: S) -> EventStream
    where
        S: Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
        E: std::fmt::Display + 'static,
    {
        let (binding, version) = (self.endpoint.binding, self.endpoint.version);
        let decode = move |_event: Option<&str>, data: &str| decode_data(binding, version, data);
        let frames = sse::frames(body, self.max_event_bytes, decode);
        Box::pin(frames.map(|frame| match frame {
            Err(SseError::TooLarge { limit }) => Err(ClientError::EventTooLarge { limit }),
            Err(e) => Err(stream_broke(e)),
            Ok(decoded) => decoded,
        }))
    }
}

impl Client {
    /// The context of one gRPC call: the endpoint's metadata (`a2a-version`, the static
    /// and identity headers, the extensions header) and the call's trace headers.
    fn grpc_call(&self, trace_headers: HeaderMap, timeout: Option<Duration>) -> super::grpc::Call {
        let mut headers = self.endpoint.headers.clone();
        headers.extend(trace_headers);
        headers.insert(A2A_VERSION, HeaderValue::from_static("1.0"));
        super::grpc::Call {
            transport: self.grpc.clone(),
            url: self.endpoint.url.clone(),
            headers,
            tenant: self.endpoint.tenant.clone().unwrap_or_default(),
            max_message_bytes: self.max_event_bytes,
            timeout,
            connect_timeout: self.direct_streams.unwrap_or(self.call_timeout),
            tls: self.tls.clone(),
        }
    }

    /// A unary gRPC call within `timeout` (default `timeouts.upstream_call`), traced and
    /// observed as every call.
    async fn grpc_unary<T, F>(
        &self,
        method: &'static str,
        timeout: Option<Duration>,
        send: impl FnOnce(super::grpc::Call) -> F,
    ) -> Result<T, ClientError>
    where
        F: std::future::Future<Output = Result<T, ClientError>>,
    {
        // Boxed, as in `grpc_stream`.
        Box::pin(async move {
            let timeout = timeout.unwrap_or(self.call_timeout);
            let result = self
                .call_traced(method, |trace| async move {
                    let call = send(self.grpc_call(trace, Some(timeout)));
                    head_within(Some(timeout), call).await?
                })
                .await;
            self.observe(method, result.is_ok());
            result
        })
        .await
    }

    /// A gRPC server stream; its first answer within `head_timeout` when bounded.
    async fn grpc_stream<F>(
        &self,
        method: &'static str,
        head_timeout: Option<Duration>,
        open: impl FnOnce(super::grpc::Call) -> F,
    ) -> Result<EventStream, ClientError>
    where
        F: std::future::Future<Output = Result<EventStream, ClientError>>,
    {
        // Boxed: an operation's future holds every binding's branch, so a JSON binding's
        // call (a run's stream opening among them) would otherwise carry a gRPC call's
        // state, several KiB (memory per open stream, docs/performance.md).
        Box::pin(self.call_traced(method, |trace| async move {
            head_within(head_timeout, open(self.grpc_call(trace, None))).await?
        }))
        .await
    }
}

/// True if a response's content type is SSE.
fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| ct.starts_with("text/event-stream"))
}

/// Awaits a response head, within `bound` if there is one. Not an async fn: that would
/// hold `head` twice, as its argument and as what it awaits.
fn head_within<T>(
    bound: Option<Duration>,
    head: impl std::future::Future<Output = T>,
) -> impl std::future::Future<Output = Result<T, ClientError>> {
    use futures::future::{Either, FutureExt};
    match bound {
        Some(t) => Either::Left(
            tokio::time::timeout(t, head).map(move |r| r.map_err(|_| ClientError::Timeout(t))),
        ),
        None => Either::Right(head.map(Ok)),
    }
}

impl Client {
    /// [`Client::open_stream_once`] over [`super::direct`]: the same request, read by the
    /// caller's task.
    async fn open_direct_stream(
        &self,
        method: &'static str,
        wire: rest::Request,
        head_timeout: Option<Duration>,
        connect_timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        let send = |headers| self.send_direct(wire, head_timeout, connect_timeout, headers);
        let mut resp = self.call_traced(method, send).await?;
        if !is_event_stream(resp.content_type.as_deref()) {
            let limit = self.max_event_bytes;
            let body = match resp.body.read_to_end(limit).await.map_err(stream_broke)? {
                Some(body) => body,
                None => return Err(ClientError::EventTooLarge { limit }),
            };
            return self.single_event(&body);
        }
        let body = futures::stream::unfold(Some(resp.body), |body| async move {
            let mut body = body?;
            match body.next_bytes().await {
                Ok(Some(bytes)) => Some((Ok(bytes), Some(body))),
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        });
        Ok(self.events_of(Box::pin(body)))
    }

    /// Sends a streaming call over [`super::direct`]; its response head within
    /// `head_timeout` when bounded.
    async fn send_direct(
        &self,
        wire: rest::Request,
        head_timeout: Option<Duration>,
        connect_timeout: Duration,
        trace_headers: HeaderMap,
    ) -> Result<super::direct::Response, ClientError> {
        let (req, head_timeout) = self.build(wire, Call::Stream(head_timeout), trace_headers);
        let request = req
            .build()
            .map_err(|e| ClientError::Unavailable(describe(&e)))?;
        let send = super::direct::send(&request, &self.tls, connect_timeout);
        let resp = head_within(head_timeout, send)
            .await?
            .map_err(|e| ClientError::Unavailable(format!("{e} ({})", self.endpoint_url())))?;
        let status = reqwest::StatusCode::from_u16(resp.status)
            .map_err(|_| ClientError::Invalid("a malformed HTTP status".into()))?;
        if !status.is_success() {
            let mut resp = resp;
            let limit = self.error_body_limit();
            let body = async move { resp.body.read_to_end(limit).await.ok().flatten() };
            return Err(self.refusal(status, body).await);
        }
        Ok(resp)
    }
}

/// A 401 or 403 as the agent's refusal of the gateway's credentials (RFC 9110 §15.5.2,
/// §15.5.4): only a 401 says a fresh credential may be accepted.
pub(super) fn refusal_of(status: u16, shown_url: &str) -> Option<super::errors::Refusal> {
    matches!(status, 401 | 403).then(|| super::errors::Refusal {
        stale: status == 401,
        shown: format!("HTTP {status} from {shown_url}"),
    })
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

/// One stream item (an SSE frame's data, or a plain JSON body answering a streaming call)
/// as the binding spells it.
fn decode_data(
    binding: Binding,
    version: ProtocolVersion,
    data: &str,
) -> Result<StreamEvent, ClientError> {
    if binding != Binding::HttpJson {
        return decode_frame(version, data);
    }
    match rest::decode_frame(data) {
        Ok(event) => Ok(event),
        Err(rest::FrameError::A2a(e)) => Err(ClientError::Rpc(e)),
        Err(rest::FrameError::Other) => Err(ClientError::Unavailable(
            "the upstream ended the stream with an error that names no A2A error".into(),
        )),
        Err(rest::FrameError::Invalid) => Err(not_a2a(data)),
    }
}

/// One streamed JSON-RPC response (an SSE frame's data, or a plain JSON body answering a
/// streaming call) as an upstream item. 1.0 marks error frames with `event: error`, 0.3 does
/// not: the envelope decides either way.
pub fn decode_frame(version: ProtocolVersion, data: &str) -> Result<StreamEvent, ClientError> {
    if let Some(decoded) = version.decode_response(data) {
        return decoded.map_err(ClientError::Rpc);
    }
    match parse_envelope(data) {
        Some(RpcReply::Result(r)) => Ok(version.decode_event(r)),
        Some(RpcReply::Error(e)) => Err(ClientError::Rpc(e)),
        None => Err(not_jsonrpc(data)),
    }
}

/// How long a call may take.
#[derive(Debug, Clone, Copy)]
enum Call {
    /// The whole exchange.
    Unary(Duration),
    /// The response head, if bounded; events are the caller's to time.
    Stream(Option<Duration>),
}

/// A reqwest error with its causes ("connection refused" is in the source chain), its URL
/// without userinfo; a refused TLS handshake by its reason ([`super::tls::explain`]).
pub fn describe(e: &reqwest::Error) -> String {
    use std::error::Error;
    if let Some(reason) = super::tls::explain(e) {
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

/// An answer that is not JSON-RPC: described by its size, never echoed
/// (docs/design.md#3-http-surface).
fn not_jsonrpc(text: &str) -> ClientError {
    ClientError::Invalid(format!(
        "the upstream answered {} bytes that are not a JSON-RPC response",
        text.len()
    ))
}

/// An HTTP+JSON answer that is not JSON: described by its size, never echoed.
fn not_a2a(text: &str) -> ClientError {
    ClientError::Invalid(format!(
        "the upstream answered {} bytes that are not A2A JSON",
        text.len()
    ))
}

/// A result that is not the expected A2A object: described, never echoed.
fn not_a(what: &str, result: &str) -> ClientError {
    ClientError::Invalid(format!(
        "the upstream's result ({} bytes) is not a {what}",
        result.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(version: ProtocolVersion) -> Client {
        let endpoint = Endpoint::json_rpc(
            "http://127.0.0.1:9/".parse().unwrap(),
            version,
            HeaderMap::new(),
        );
        Client::new(
            reqwest::Client::new(),
            endpoint,
            1024,
            Duration::from_secs(1),
        )
    }

    /// What callers ask before an operation a version may lack (the thread list, a thread's
    /// detail, pick-up): A2A 1.0 has every operation, 0.3 all but `ListTasks`; and an
    /// operation not supported is refused without a call.
    #[tokio::test]
    async fn supports_says_which_operations_a_version_has() {
        for op in Operation::ALL {
            assert!(client(ProtocolVersion::V1).supports(op), "{op:?}");
            let v0_3 = client(ProtocolVersion::V0_3);
            assert_eq!(v0_3.supports(op), op != Operation::ListTasks, "{op:?}");
        }
        let refused = client(ProtocolVersion::V0_3)
            .list_tasks(None, 1, None, 0, false)
            .await;
        assert!(
            matches!(refused, Err(ClientError::Unsupported(..))),
            "{refused:?}"
        );
    }

    /// Every header a call carries is configured (the endpoint's headers, the identity
    /// header) or in [`owned_headers`], so configuration is refused exactly the headers the
    /// gateway would overwrite or double: a header the client starts setting without listing
    /// it fails here. Both versions, with extensions asked for and a trace context (one with
    /// `tracestate`, which the client's run span passes on).
    #[test]
    fn a_call_carries_only_owned_and_configured_headers() {
        let traces =
            crate::telemetry::Traces::start(&"http://127.0.0.1:9/v1/traces".parse().unwrap())
                .unwrap();
        let mut inbound = HeaderMap::new();
        inbound.insert(
            "traceparent",
            HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        );
        inbound.insert("tracestate", HeaderValue::from_static("vendor=value"));
        let run = traces.run(&inbound, "a", "t");
        let owned: Vec<HeaderName> = owned_headers().collect();
        let bindings = [
            (ProtocolVersion::V1, Binding::JsonRpc),
            (ProtocolVersion::V0_3, Binding::JsonRpc),
            (ProtocolVersion::V1, Binding::HttpJson),
        ];
        for (version, binding) in bindings {
            let mut configured = HeaderMap::new();
            configured.insert("x-api-key", HeaderValue::from_static("k"));
            let endpoint = Endpoint {
                binding,
                tenant: Some("acme".into()),
                ..Endpoint::json_rpc("http://127.0.0.1:9/".parse().unwrap(), version, configured)
            };
            let client = Client::new(
                reqwest::Client::new(),
                endpoint,
                1024,
                Duration::from_secs(1),
            )
            .with_header(
                HeaderName::from_static("x-caller"),
                HeaderValue::from_static("alice"),
            )
            .with_extensions(&["urn:x".to_owned()])
            .traced(run.clone());
            let (trace_headers, span) = run.call("m", binding.as_str());
            span.end(true);
            for call in [Call::Unary(Duration::from_secs(1)), Call::Stream(None)] {
                let params = serde_json::json!({"id": "t"});
                let wire = client.wire(Operation::GetTask, "m", params).unwrap();
                let (req, _) = client.build(wire, call, trace_headers.clone());
                let req = req.build().unwrap();
                let names: Vec<&str> = req.headers().keys().map(HeaderName::as_str).collect();
                for name in req.headers().keys() {
                    assert!(
                        owned.contains(name) || ["x-api-key", "x-caller"].contains(&name.as_str()),
                        "{version:?} {binding:?} sends {name}, neither owned nor configured: {names:?}"
                    );
                }
                for expected in [
                    "traceparent",
                    "tracestate",
                    version.extensions_header().as_str(),
                ] {
                    assert!(names.contains(&expected), "{version:?}: {names:?}");
                }
            }
            // gRPC: the same headers as metadata (tonic adds its own framing: `te`,
            // `content-type`, `grpc-timeout`, which configuration may not set either).
            if version == ProtocolVersion::V1 {
                let grpc = Client {
                    endpoint: Endpoint {
                        binding: Binding::Grpc,
                        ..client.endpoint.clone()
                    },
                    ..client.clone()
                };
                let call = grpc.grpc_call(trace_headers.clone(), Some(Duration::from_secs(1)));
                let names: Vec<&str> = call.headers.keys().map(HeaderName::as_str).collect();
                for name in call.headers.keys() {
                    assert!(
                        owned.contains(name) || ["x-api-key", "x-caller"].contains(&name.as_str()),
                        "gRPC sends {name}, neither owned nor configured: {names:?}"
                    );
                }
                for expected in ["traceparent", "a2a-version", "a2a-extensions", "x-caller"] {
                    assert!(names.contains(&expected), "gRPC: {names:?}");
                }
                assert!(owned.contains(&GRPC_TIMEOUT));
            }
        }
        traces.shutdown();
    }

    /// A run holds its stream's opening, and a pick-up's `ListTasks`, while they take: a
    /// JSON binding's call must not carry a gRPC call's state nor hold a future twice (1,000
    /// streams opening at once each held 18 KiB for the opening alone; docs/performance.md).
    #[test]
    fn a_json_bindings_calls_hold_no_grpc_state() {
        const BOUND: usize = 6 * 1024;
        let c = client(ProtocolVersion::V1);
        let msg = OutgoingMessage::default();
        let sizes = [
            ("stream_message", size_of_val(&c.stream_message(&msg, None))),
            ("subscribe", size_of_val(&c.subscribe("t"))),
            (
                "send_message",
                size_of_val(&c.send_message(&msg, None, None)),
            ),
            (
                "list_tasks_paged",
                size_of_val(&c.list_tasks_paged(None, 1, 1, 1, true)),
            ),
        ];
        for (call, size) in sizes {
            assert!(size <= BOUND, "{call}: {size} bytes");
        }
    }
}
