//! The client's own rules, without an upstream: which operations a version has, which
//! headers a call carries on each binding, and how much a JSON binding's call holds.

use super::http::Bound;
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
        .list_tasks(&CallContext::none(), ListTasks::default())
        .await;
    assert!(
        matches!(refused, Err(ClientError::Unsupported(..))),
        "{refused:?}"
    );
}

/// The one `match` on the binding picks each binding's codec: what the JSON transport then
/// asks of it (a unary call's `Accept`; whether a non-2xx body is read for the A2A error it
/// names, HTTP+JSON's `google.rpc.Status`, never JSON-RPC's), and gRPC's own request.
#[test]
fn each_binding_has_its_codec() {
    let status =
        br#"{"error": {"code": 404, "message": "no", "details": [{"reason": "TASK_NOT_FOUND"}]}}"#;
    let cases = [
        (Binding::JsonRpc, Some(("application/json", None))),
        (
            Binding::HttpJson,
            Some((
                "application/a2a+json, application/json",
                Some(crate::a2a::rpc_code::TASK_NOT_FOUND),
            )),
        ),
        (Binding::Grpc, None),
    ];
    for (binding, json) in cases {
        let mut client = client(ProtocolVersion::V1);
        client.endpoint.binding = binding;
        let encoded = client.encode(&Call::ExtendedCard);
        match (encoded, json) {
            (Ok(Wire::Json(call)), Some((accept, error))) => {
                assert_eq!(call.codec.accept(), accept, "{binding:?}");
                let read = call.codec.error_body().and_then(|of| of(404, status));
                assert_eq!(read.map(|e| e.code), error, "{binding:?}");
            }
            (Ok(Wire::Grpc(_)), None) => {}
            _ => panic!("{binding:?}: another binding's wire"),
        }
    }
}

/// Every header a call carries is configured (the endpoint's headers, the identity
/// header) or in [`owned_headers`], so configuration is refused exactly the headers the
/// gateway would overwrite or double: a header the client starts setting without listing
/// it fails here. Both versions, with extensions asked for and a trace context (one with
/// `tracestate`, which the client's run span passes on).
#[test]
fn a_call_carries_only_owned_and_configured_headers() {
    let traces =
        crate::telemetry::Traces::start(&"http://127.0.0.1:9/v1/traces".parse().unwrap()).unwrap();
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
        .with_extensions(&["urn:x".to_owned()]);
        let identity = (
            HeaderName::from_static("x-caller"),
            HeaderValue::from_static("alice"),
        );
        let ctx = CallContext::new(None, Some(identity), None);
        let (trace_headers, span) = run.call("m", binding.as_str());
        span.end(true);
        let id = TaskId::new("t");
        let call = Call::GetTask {
            id: &id,
            history_length: None,
        };
        for bound in [Bound::Unary(Duration::from_secs(1)), Bound::Stream(None)] {
            let Ok(Wire::Json(json)) = client.encode(&call) else {
                panic!("{binding:?}")
            };
            let headers = client.headers(&ctx, &call, HeaderMap::new());
            let (req, _) = client.build(json, bound, headers, trace_headers.clone());
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
            let headers = grpc.headers(&ctx, &call, HeaderMap::new());
            let exchange =
                grpc.grpc_exchange(headers, trace_headers.clone(), Some(Duration::from_secs(1)));
            let names: Vec<&str> = exchange.headers.keys().map(HeaderName::as_str).collect();
            for name in exchange.headers.keys() {
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
        (
            "stream_message",
            size_of_val(&c.stream_message(&CallContext::none(), &msg, None)),
        ),
        (
            "subscribe",
            size_of_val(&c.subscribe(&CallContext::none(), &TaskId::new("t"))),
        ),
        (
            "send_message",
            size_of_val(&c.send_message(&CallContext::none(), &msg, None, None)),
        ),
        (
            "list_tasks_paged",
            size_of_val(&c.list_tasks_paged(&CallContext::none(), ListTasks::default(), 1)),
        ),
    ];
    for (call, size) in sizes {
        assert!(size <= BOUND, "{call}: {size} bytes");
    }
}
