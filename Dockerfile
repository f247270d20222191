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
# Loopback by default, even inside the container: the gateway (and its demo agent) answer
# nobody outside until you say so. To expose it, set GATEWAY_LISTEN=0.0.0.0:8080 at run time
# (docker run -e GATEWAY_LISTEN=0.0.0.0:8080 -p 8080:8080 ...) and put it behind something
# that authenticates callers, or configure inbound auth (--api-key, or auth: in a config
# file). Without inbound auth a non-loopback address also needs --insecure-no-auth (DESIGN
# §2): pass it only when what is in front authenticates.
ENV GATEWAY_LISTEN=127.0.0.1:8080
ENTRYPOINT ["agui-a2a-gateway"]
CMD ["--demo"]
