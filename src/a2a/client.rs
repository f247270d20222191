//! The A2A client: one [`Client`] per upstream endpoint, both protocol versions, the three
//! bindings. Every caller (runs, thread reads, CopilotKit connect and stop, cancels) calls
//! the same operations whichever binding the card selected, and gets the same model and the
//! same errors back ([`super::errors`]). An operation is a [`Call`] value (a task by its
//! [`TaskId`]); its binding's pure codec ([`super::jsonrpc`], [`super::rest`],
//! [`super::grpc`]) spells its request and reads its answer, chosen in the one `match` on
//! the binding (`Client::encode`). This file does only what every call has in common: the
//! per-call headers (credentials, extensions, trace context), the one retry after a stale
//! credential ([`super::call_headers`]), tracing, metrics, timeouts and size bounds.
//!
//! A client is built once per agent resolution and shared by every run: what differs per
//! run or request — the run's trace, the caller identity header, the caller's credentials —
//! is a [`CallContext`] every operation takes as an argument, never a copy of the client.
//!
//! Lenient where upstreams are sloppy (docs/design.md#6-projection-a2a-to-ag-ui): a streaming
//! call may be answered with plain JSON (a JSON-RPC error before the stream starts, or a
//! single result), SSE may use CRLF and `:` comment frames, and errors inside a stream come
//! as `event: error` frames (1.0) or plain `data:` frames (0.3). Every 1.0 call carries
//! `A2A-Version: 1.0` (a2a-sdk treats a missing header as 0.3 and answers -32009).
//!
//! Hostile upstreams (docs/design.md#9-reliability-and-limits): every unary call and the
//! response head of a subscription are bounded by `timeouts.upstream_call` (the first event
//! of a new message stream is the caller's `first_event`; the time between events its
//! `idle`); bodies are read with a size bound; an upstream's response body is never echoed
//! (errors carry a status and a short reason of our own, or the A2A error an HTTP+JSON error
//! body names, read within [`MAX_ERROR_BODY`] and `timeouts.upstream_call`); URLs in
//! messages lose their userinfo ([`crate::redact`]).
//!
//! Transport: the JSON bindings' calls are built by reqwest; unary calls are sent by it,
//! streams by `a2a::direct` (read in the caller's task, over TLS for `https://`; see its
//! header for why) unless a proxy is configured (`client/http.rs`; both stream paths share
//! what follows the head, and read answers through the binding's codec, never asking which
//! binding it is). gRPC calls go over the endpoint's channel ([`super::grpc`];
//! `client/grpc_call.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};

use super::call::{Answer, Call, HttpRequest, JsonCodec, ListTasks, PushConfig, SendArgs};
use super::call_headers::CallHeaders;
use super::card::Binding;
use super::model::{OutgoingMessage, ProtocolVersion, StreamEvent, Task, TaskPage};
use super::{grpc, jsonrpc, rest, Operation};
use crate::ids::TaskId;

mod grpc_call;
mod http;

use http::JsonCall;
pub use http::{describe, read_limited};

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

/// What one call carries for whom it is made, passed to every operation (borrowed, built per
/// run or request, never a copy of the client): the run's trace, the caller identity header
/// (`forward_identity`) and the caller-dependent credentials. Built by
/// `registry::call_context`, the one home of those rules; [`CallContext::none`] for calls
/// made for nobody (card reads, probes).
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The run whose call this is, when traces are on (docs/design.md#10-observability): a
    /// span per call, sent upstream as `traceparent`.
    pub(crate) trace: Option<crate::telemetry::RunTrace>,
    /// One more header on the call (`forward_identity`), in place of a configured one of
    /// the same name.
    pub(crate) identity: Option<(HeaderName, HeaderValue)>,
    /// Headers decided per call in place of the client's own source
    /// ([`super::call_headers`]): the caller's credentials where the agent's depend on the
    /// caller.
    pub(crate) credentials: Option<std::sync::Arc<dyn CallHeaders>>,
}

impl CallContext {
    /// The context of a call made for nobody: the client's own headers and credentials,
    /// untraced.
    pub fn none() -> Self {
        Self::default()
    }

    /// A call made for a caller: with its identity header and its credentials, if any,
    /// within the run `trace`, if traced.
    pub(crate) fn new(
        trace: Option<crate::telemetry::RunTrace>,
        identity: Option<(HeaderName, HeaderValue)>,
        credentials: Option<std::sync::Arc<dyn CallHeaders>>,
    ) -> Self {
        Self {
            trace,
            identity,
            credentials,
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
    /// Streams from an `http://` endpoint are read by [`super::direct`] (connecting within
    /// this bound) rather than reqwest; `None`: every call goes through reqwest.
    direct_streams: Option<Duration>,
    /// The gRPC binding's channel (unused by the others).
    grpc: grpc::Transport,
    /// Headers decided per call (the agent's credentials that change), if any; a call's
    /// context may bring its own in their place ([`CallContext::credentials`]).
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

/// One attempt of a call as the transports take it: its context (for its trace), its
/// method name, and its headers (the endpoint's, the context's, the credentials, the
/// extensions).
struct Sending<'a> {
    ctx: &'a CallContext,
    method: &'static str,
    headers: HeaderMap,
}

/// A call as its binding sends it.
enum Wire {
    /// JSON-RPC or HTTP+JSON: an HTTP request, read through its binding's codec.
    Json(JsonCall),
    /// Boxed: a JSON binding's call need not carry a gRPC message's room.
    Grpc(Box<grpc::Request>),
}

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
            direct_streams: None,
            grpc: grpc::Transport::default(),
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

    /// This client adding `source`'s headers (the agent's credentials) to every call whose
    /// context brings none ([`super::call_headers`]).
    pub fn with_call_headers(mut self, source: std::sync::Arc<dyn CallHeaders>) -> Client {
        self.call_headers = Some(source);
        self
    }

    /// This client reading its `http://` streams itself (`a2a::direct`), connecting
    /// within `connect_timeout` (`timeouts.connect`).
    pub fn with_direct_streams(mut self, connect_timeout: Duration) -> Self {
        self.direct_streams = Some(connect_timeout);
        self
    }

    /// This client telling `hook` of every call.
    pub fn observed(mut self, hook: CallHook) -> Self {
        self.on_call = Some(hook);
        self
    }

    /// This client asking, on top of its own, for the extensions `uris` on every call.
    pub fn with_extensions(mut self, uris: &[String]) -> Client {
        add_extensions(&mut self.endpoint.headers, self.endpoint.version, uris);
        self
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

    // ---- the operations ----

    /// `SendStreamingMessage` / `message/stream`. The head may come with the first event:
    /// the caller's `first_event` bounds both.
    pub async fn stream_message(
        &self,
        ctx: &CallContext,
        msg: &OutgoingMessage,
        history_length: Option<u32>,
    ) -> Result<EventStream, ClientError> {
        let send = SendArgs {
            message: msg,
            history_length,
        };
        self.stream(ctx, Call::Stream(send), None).await
    }

    /// `SubscribeToTask` / `tasks/resubscribe`; the response head within
    /// `timeouts.upstream_call`.
    pub async fn subscribe(
        &self,
        ctx: &CallContext,
        id: &TaskId,
    ) -> Result<EventStream, ClientError> {
        let call = Call::Subscribe { id };
        self.stream(ctx, call, Some(self.call_timeout)).await
    }

    /// `SendMessage` / `message/send` (blocking): a Task or a Message, within `timeout`
    /// (default `timeouts.upstream_call`).
    pub async fn send_message(
        &self,
        ctx: &CallContext,
        msg: &OutgoingMessage,
        history_length: Option<u32>,
        timeout: Option<Duration>,
    ) -> Result<StreamEvent, ClientError> {
        let send = SendArgs {
            message: msg,
            history_length,
        };
        self.unary(ctx, Call::Send(send), timeout)
            .await?
            .into_event()
    }

    /// `GetTask` / `tasks/get`.
    pub async fn get_task(
        &self,
        ctx: &CallContext,
        id: &TaskId,
        history_length: Option<u32>,
    ) -> Result<Task, ClientError> {
        let call = Call::GetTask { id, history_length };
        self.unary(ctx, call, None).await?.into_task()
    }

    /// `CancelTask` / `tasks/cancel`.
    pub async fn cancel_task(&self, ctx: &CallContext, id: &TaskId) -> Result<Task, ClientError> {
        let call = Call::CancelTask { id };
        self.unary(ctx, call, None).await?.into_task()
    }

    /// `ListTasks` (1.0 only; newest first).
    pub async fn list_tasks(
        &self,
        ctx: &CallContext,
        list: ListTasks<'_>,
    ) -> Result<TaskPage, ClientError> {
        let call = Call::ListTasks(list);
        self.unary(ctx, call, None).await?.into_page()
    }

    /// `GetExtendedAgentCard` / `agent/getAuthenticatedExtendedCard`: the card served to
    /// authenticated callers (A2A 1.0 §9.4.7).
    pub async fn get_extended_card(
        &self,
        ctx: &CallContext,
    ) -> Result<super::card::AgentCard, ClientError> {
        let call = Call::ExtendedCard;
        self.unary(ctx, call, None).await?.into_card()
    }

    /// `CreateTaskPushNotificationConfig` / `tasks/pushNotificationConfig/set`: the agent
    /// posts the updates of `push.task_id` to `push.url` with `push.token`. An agent
    /// without push notifications answers -32003 (`PushNotificationNotSupported`).
    pub async fn set_push_config(
        &self,
        ctx: &CallContext,
        push: PushConfig<'_>,
    ) -> Result<(), ClientError> {
        let call = Call::SetPushConfig(push);
        self.unary(ctx, call, None).await?.into_push_config_set()
    }

    /// `ListTasks` over up to `pages` pages from `list`'s first (newest first), all of them
    /// within one `timeouts.upstream_call`. `Err` only if the first page fails; a later
    /// failure or the deadline ends the list with what was read.
    pub async fn list_tasks_paged(
        &self,
        ctx: &CallContext,
        list: ListTasks<'_>,
        pages: usize,
    ) -> Result<Vec<Task>, ClientError> {
        let deadline = tokio::time::Instant::now() + self.call_timeout;
        let mut tasks = Vec::new();
        let mut token: Option<String> = list.page_token.map(str::to_owned);
        for page_no in 0..pages {
            let page_token = token.as_deref();
            let call = self.list_tasks(ctx, ListTasks { page_token, ..list });
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

    // ---- what every call has in common ----

    /// `op`'s method name in the endpoint's version, or why there is none.
    fn method(&self, op: Operation) -> Result<&'static str, ClientError> {
        let version = self.endpoint.version;
        version
            .method(op)
            .ok_or(ClientError::Unsupported(op.name(), version.as_str()))
    }

    /// Runs `call` with the call's changing headers (the context's source, else the
    /// client's; none without either); when the agent refuses them as stale (a 401), tells
    /// the source and runs it once more with fresh ones ([`super::call_headers`]).
    async fn authorized<'a, T, F, Fut>(
        &'a self,
        ctx: &CallContext,
        call: F,
    ) -> Result<T, ClientError>
    where
        F: Fn(HeaderMap) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>> + 'a,
    {
        let Some(source) = ctx.credentials.as_ref().or(self.call_headers.as_ref()) else {
            return call(HeaderMap::new()).await;
        };
        let sent = source.headers().await.map_err(ClientError::Credentials)?;
        match call(sent.clone()).await {
            Err(ClientError::Unauthorized(refusal)) if refusal.stale => {
                source.refused(&sent);
                let fresh = source.headers().await.map_err(ClientError::Credentials)?;
                call(fresh).await
            }
            other => other,
        }
    }

    /// The headers of one call: the endpoint's, the context's identity header and then
    /// `credentials` in place of those of the same name, and the extensions the call's
    /// message uses added to the endpoint's.
    fn headers(&self, ctx: &CallContext, call: &Call<'_>, credentials: HeaderMap) -> HeaderMap {
        let mut headers = self.endpoint.headers.clone();
        if let Some((name, value)) = &ctx.identity {
            headers.insert(name, value.clone());
        }
        for (name, value) in &credentials {
            headers.insert(name, value.clone());
        }
        add_extensions(&mut headers, self.endpoint.version, call.extensions());
        headers
    }

    /// One attempt of `call` as the transports take it ([`Sending`]).
    fn sending<'a>(
        &self,
        ctx: &'a CallContext,
        method: &'static str,
        call: &Call<'_>,
        credentials: HeaderMap,
    ) -> Sending<'a> {
        let headers = self.headers(ctx, call, credentials);
        Sending {
            ctx,
            method,
            headers,
        }
    }

    /// `call` as the endpoint's binding spells it, the tenant in it (A2A 1.0 §4.4: a
    /// request field, the HTTP+JSON path segment; 0.3 has none). The one place the client
    /// asks which binding the endpoint speaks: what differs between them is the binding's
    /// codec, chosen here.
    fn encode(&self, call: &Call<'_>) -> Result<Wire, ClientError> {
        let Endpoint {
            url,
            version,
            tenant,
            ..
        } = &self.endpoint;
        let tenant = tenant.as_deref();
        let json = |request: HttpRequest, codec: &'static dyn JsonCodec| {
            Ok(Wire::Json(JsonCall { request, codec }))
        };
        match self.endpoint.binding {
            Binding::JsonRpc => {
                let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                let request = jsonrpc::http_request(url, call, *version, tenant, id)?;
                json(request, &jsonrpc::JsonRpc)
            }
            Binding::HttpJson => json(rest::request(url, call, tenant)?, &rest::HttpJson),
            Binding::Grpc => Ok(Wire::Grpc(Box::new(grpc::request(
                call,
                tenant.unwrap_or_default(),
            )))),
        }
    }

    /// A unary call within `timeout` (default `timeouts.upstream_call`).
    async fn unary(
        &self,
        ctx: &CallContext,
        call: Call<'_>,
        timeout: Option<Duration>,
    ) -> Result<Answer, ClientError> {
        let method = self.method(call.operation())?;
        let timeout = timeout.unwrap_or(self.call_timeout);
        let call = &call;
        self.authorized(ctx, |credentials| async move {
            let sending = self.sending(ctx, method, call, credentials);
            let result = match self.encode(call) {
                Err(e) => Err(e),
                Ok(Wire::Grpc(request)) => self.grpc_unary(sending, request, timeout).await,
                Ok(Wire::Json(json)) => {
                    let op = call.operation();
                    self.http_unary(sending, op, json, timeout).await
                }
            };
            self.observe(method, result.is_ok());
            result
        })
        .await
    }

    /// A streaming call; its response head within `head_timeout` when bounded. A stream is
    /// one call: its hook is told when it ends.
    async fn stream(
        &self,
        ctx: &CallContext,
        call: Call<'_>,
        head_timeout: Option<Duration>,
    ) -> Result<EventStream, ClientError> {
        let method = self.method(call.operation())?;
        let call = &call;
        self.authorized(ctx, |credentials| async move {
            let sending = self.sending(ctx, method, call, credentials);
            let opened = match self.encode(call) {
                Err(e) => Err(e),
                Ok(Wire::Grpc(request)) => self.grpc_stream(sending, request, head_timeout).await,
                Ok(Wire::Json(json)) => self.http_stream(sending, json, head_timeout).await,
            };
            self.observed_stream(method, opened)
        })
        .await
    }

    fn observe(&self, method: &'static str, ok: bool) {
        if let Some(hook) = &self.on_call {
            (hook.0)(method, ok);
        }
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

    /// docs/design.md#10-observability: a span per upstream call around
    /// `send(headers, trace_headers)`, with the attempt's headers and its span's context to
    /// send upstream as `traceparent` (none when the call's context has no trace).
    async fn call_traced<T, F>(
        &self,
        sending: Sending<'_>,
        send: impl FnOnce(HeaderMap, HeaderMap) -> F,
    ) -> Result<T, ClientError>
    where
        F: std::future::Future<Output = Result<T, ClientError>>,
    {
        let Sending {
            ctx,
            method,
            headers,
        } = sending;
        let Some(trace) = &ctx.trace else {
            return send(headers, HeaderMap::new()).await;
        };
        let (trace_headers, span) = trace.call(method, self.endpoint.binding.as_str());
        let result = send(headers, trace_headers).await;
        span.end(result.is_ok());
        result
    }
}

/// Adds `uris` to the extensions `headers` ask for (A2A 1.0 §4.6: the `A2A-Extensions`
/// header; `X-A2A-Extensions` for 0.3 agents), in one header value.
fn add_extensions(headers: &mut HeaderMap, version: ProtocolVersion, uris: &[String]) {
    if uris.is_empty() {
        return;
    }
    let name = version.extensions_header();
    let mut all: Vec<String> = headers
        .get(&name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(',').map(|u| u.trim().to_owned()).collect())
        .unwrap_or_default();
    for uri in uris {
        if !all.contains(uri) {
            all.push(uri.clone());
        }
    }
    if let Ok(value) = HeaderValue::from_str(&all.join(", ")) {
        headers.insert(name, value);
    }
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

#[cfg(test)]
mod tests;
