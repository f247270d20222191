//! The gRPC binding's calls as the client makes them: a call's context
//! ([`grpc::Exchange`]) with the call's headers as metadata, `a2a-version` and its trace
//! context, sent within its bounds over the endpoint's channel ([`crate::a2a::grpc`], which
//! encodes, sends and decodes). What every call shares is the client's ([`super::Client`]).

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};

use super::{head_within, Client, ClientError, EventStream, Sending, A2A_VERSION};
use crate::a2a::call::Answer;
use crate::a2a::grpc;

impl Client {
    /// The context of one gRPC call: `headers` (the endpoint's, the identity and
    /// extensions headers, credentials) as metadata with `a2a-version` and the call's trace
    /// headers.
    pub(super) fn grpc_exchange(
        &self,
        mut headers: HeaderMap,
        trace_headers: HeaderMap,
        timeout: Option<Duration>,
    ) -> grpc::Exchange {
        headers.extend(trace_headers);
        headers.insert(A2A_VERSION, HeaderValue::from_static("1.0"));
        grpc::Exchange {
            transport: self.grpc.clone(),
            url: self.endpoint.url.clone(),
            headers,
            max_message_bytes: self.max_event_bytes,
            timeout,
            connect_timeout: self.direct_streams.unwrap_or(self.call_timeout),
            tls: self.tls.clone(),
        }
    }

    /// A unary gRPC call within `timeout`, traced.
    pub(super) async fn grpc_unary(
        &self,
        sending: Sending<'_>,
        request: Box<grpc::Request>,
        timeout: Duration,
    ) -> Result<Answer, ClientError> {
        // Boxed, as in `grpc_stream`.
        Box::pin(self.call_traced(sending, |headers, trace| async move {
            let exchange = self.grpc_exchange(headers, trace, Some(timeout));
            head_within(Some(timeout), exchange.unary(*request)).await?
        }))
        .await
    }

    /// A gRPC server stream; its first answer within `head_timeout` when bounded.
    pub(super) async fn grpc_stream(
        &self,
        sending: Sending<'_>,
        request: Box<grpc::Request>,
        head_timeout: Option<Duration>,
    ) -> Result<EventStream, ClientError> {
        // Boxed: an operation's future holds every binding's branch, so a JSON binding's
        // call (a run's stream opening among them) would otherwise carry a gRPC call's
        // state, several KiB (memory per open stream, docs/performance.md).
        Box::pin(self.call_traced(sending, |headers, trace| async move {
            let exchange = self.grpc_exchange(headers, trace, None);
            head_within(head_timeout, exchange.stream(*request)).await?
        }))
        .await
    }
}
