# agui-a2a-gateway: build with the Rust toolchain, run on a slim Debian with CA roots.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
COPY tests ./tests
COPY fixtures ./fixtures
COPY config ./config
# The repo's release profile keeps debug info for profiling; the image does not need it.
ENV CARGO_PROFILE_RELEASE_DEBUG=0
RUN cargo build --release --locked --bin agui-a2a-gateway

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 gateway
COPY --from=build /src/target/release/agui-a2a-gateway /usr/local/bin/agui-a2a-gateway
COPY config/gateway.example.yaml /etc/agui-a2a-gateway/gateway.example.yaml
USER gateway
EXPOSE 8080
ENV GATEWAY_LISTEN=0.0.0.0:8080
ENTRYPOINT ["agui-a2a-gateway"]
CMD ["--demo"]
