//! Traces (docs/design.md#10-observability): OpenTelemetry over OTLP/HTTP (protobuf), when
//! `telemetry.otlp_endpoint` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) is set; otherwise nothing is
//! built and nothing is done per run.
//!
//! A span per run ([`RUN_SPAN`]) whose parent is the client's W3C `traceparent`, and a child
//! per upstream call ([`CALL_SPAN`]) whose context goes upstream as `traceparent`. Each
//! gateway owns its exporter (no process-global tracer: replicas in one process, as in the
//! tests, keep theirs apart). Export is batched on the SDK's own thread with a bounded queue
//! and a short timeout: an unreachable collector loses spans, it never slows or fails a run.

use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

/// The span of one AG-UI run.
pub const RUN_SPAN: &str = "agui.run";
/// The span of one A2A call.
pub const CALL_SPAN: &str = "a2a.call";
/// The headers a call's trace context goes upstream in (W3C Trace Context, as
/// [`TraceContextPropagator`] writes them).
pub(crate) const TRACE_HEADERS: [HeaderName; 2] = [
    HeaderName::from_static("traceparent"),
    HeaderName::from_static("tracestate"),
];
/// Spans held for export at most; more are dropped.
const MAX_QUEUE: usize = 4096;
/// One export's bound.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);

/// A gateway's traces exporter.
#[derive(Debug)]
pub(crate) struct Traces {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(key), HeaderValue::try_from(value)) {
            self.0.insert(name, value);
        }
    }
}

impl Traces {
    /// An exporter to `endpoint` (the full OTLP/HTTP `/v1/traces` URL).
    pub(crate) fn start(endpoint: &url::Url) -> Result<Self, String> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(endpoint.as_str())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| format!("OTLP exporter: {e}"))?;
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(MAX_QUEUE)
            .with_scheduled_delay(Duration::from_millis(500))
            .build();
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch)
            .build();
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("agui-a2a-gateway")
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("agui-a2a-gateway");
        Ok(Self { provider, tracer })
    }

    /// Starts a run's span: a child of the client's `traceparent` if it sent one.
    pub(crate) fn run(&self, headers: &HeaderMap, agent: &str, thread_id: &str) -> RunTrace {
        let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        let span = self
            .tracer
            .span_builder(RUN_SPAN)
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("a2a.agent", agent.to_owned()),
                KeyValue::new("agui.thread_id", thread_id.to_owned()),
            ])
            .start_with_context(&self.tracer, &parent);
        RunTrace {
            cx: parent.with_span(span),
            tracer: self.tracer.clone(),
        }
    }

    /// Exports what is queued (bounded by the export timeout).
    pub(crate) fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }
}

/// A run's span, and what starts its children.
#[derive(Debug, Clone)]
pub(crate) struct RunTrace {
    cx: Context,
    tracer: SdkTracer,
}

/// What the run's span says at its end.
#[derive(Debug, Default)]
pub(crate) struct RunEnd<'a> {
    pub context_id: Option<&'a str>,
    pub task_id: Option<&'a str>,
    pub task_state: Option<&'a str>,
    pub outcome: &'a str,
    pub error: Option<&'a str>,
}

impl RunTrace {
    /// The trace id (hex), for the logs.
    pub(crate) fn trace_id(&self) -> String {
        self.cx.span().span_context().trace_id().to_string()
    }

    /// Starts an upstream call's span: the call's `traceparent` header and its span.
    pub(crate) fn call(
        &self,
        method: &'static str,
        binding: &'static str,
    ) -> (HeaderMap, CallTrace) {
        let span = self
            .tracer
            .span_builder(CALL_SPAN)
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("a2a.method", method),
                KeyValue::new("a2a.binding", binding),
            ])
            .start_with_context(&self.tracer, &self.cx);
        let cx = self.cx.with_span(span);
        let mut headers = HeaderMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(&mut headers));
        (headers, CallTrace { cx })
    }

    /// Ends the run's span with its attributes.
    pub(crate) fn end(&self, end: RunEnd<'_>) {
        let span = self.cx.span();
        let mut attributes = vec![KeyValue::new("agui.outcome", end.outcome.to_owned())];
        for (key, value) in [
            ("a2a.context_id", end.context_id),
            ("a2a.task_id", end.task_id),
            ("a2a.task.state", end.task_state),
        ] {
            if let Some(v) = value {
                attributes.push(KeyValue::new(key, v.to_owned()));
            }
        }
        span.set_attributes(attributes);
        if let Some(code) = end.error {
            span.set_status(Status::error(code.to_owned()));
        }
        span.end();
    }
}

/// An upstream call's span, ended with the call.
#[derive(Debug)]
pub(crate) struct CallTrace {
    cx: Context,
}

impl CallTrace {
    pub(crate) fn end(self, ok: bool) {
        let span = self.cx.span();
        if !ok {
            span.set_status(Status::error("upstream call failed"));
        }
        span.end();
    }
}
