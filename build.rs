//! Generates the gRPC binding's client (`lf.a2a.v1`, `google.rpc`) from `proto/`, compiled
//! in Rust by protox: no `protoc` needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "a2a.proto",
        "google/rpc/status.proto",
        "google/rpc/error_details.proto",
    ];
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
