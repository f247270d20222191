//! Generates, from `proto/`, compiled in Rust by protox (no `protoc` needed):
//! - the gRPC binding (`lf.a2a.v1`, `google.rpc`). The client is the gateway's
//!   (`src/a2a/grpc.rs`), the server the demo agent's (`src/demo/grpc.rs`); neither uses
//!   tonic's transport module (the demo mounts the service in its own router).
//! - AG-UI's protobuf messages (`ag_ui`, `proto/agui/`), messages only, for the
//!   HTTP+Protobuf encoding of run streams (`src/agui/proto.rs`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "a2a.proto",
        "google/rpc/status.proto",
        "google/rpc/error_details.proto",
    ];
    let descriptors = protox::compile(files, ["proto"])?;
    // googleapis' comments hold example snippets that rustdoc would run as doctests (and
    // tonic-prost-build's own `disable_comments` reaches only the service, not the messages).
    let mut messages = prost_build::Config::new();
    messages.disable_comments([".google.rpc"]);
    tonic_prost_build::configure()
        .build_server(true)
        .build_transport(false)
        .compile_fds_with_config(descriptors, messages)?;
    // AG-UI's files import each other by bare name (`import "types.proto"`), as published.
    let agui = protox::compile(["events.proto"], ["proto/agui"])?;
    prost_build::Config::new().compile_fds(agui)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
