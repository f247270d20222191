# agui-a2a-gateway: build with the Rust toolchain, run on a slim Debian with CA roots.
# Checked without Docker by scripts/container-check (hadolint, the same release build, the
# binary run as uid 10001 with this image's defaults, its --healthcheck, SIGTERM).
# Base images pinned by tag: the toolchain the repo is tested with, Debian 12 for both stages
# (the binary links the build stage's glibc).
FROM rust:1.95.0-bookworm AS build
WORKDIR /src
# The repo's release profile keeps debug info for profiling; the image does not need it.
ENV CARGO_PROFILE_RELEASE_DEBUG=0

# Dependency layer: rebuilt only when Cargo.toml or Cargo.lock change. Cargo needs a file for
# every target the manifest names (src/lib.rs, src/main.rs, the [[bench]]es benches/gateway.rs,
# benches/inbox.rs and benches/store.rs, the [[test]] tests/e2e/main.rs), so stubs stand in; only the binary (and the library) are
# built, never the bench or the tests, which is why their stubs stay in the next layer too.
# build.rs and proto/ (the gRPC binding's generated client) belong to this layer: they change
# as rarely as the manifest.
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
RUN mkdir -p src benches tests/e2e \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && echo 'fn main() {}' > benches/gateway.rs \
    && echo 'fn main() {}' > benches/inbox.rs \
    && echo 'fn main() {}' > benches/store.rs \
    && echo 'fn main() {}' > tests/e2e/main.rs \
    && cargo build --release --locked --bin agui-a2a-gateway \
    && rm -rf src

# The sources, and what they include at compile time (include_str!: the OpenAPI description
# and the review console, served at run time). COPY keeps their (older) mtimes, so touch them: cargo must not take the
# stub build above for an up-to-date one. scripts/container-check builds from exactly the
# files this stage COPYs.
COPY openapi/openapi.json ./openapi/openapi.json
COPY console ./console
COPY src ./src
RUN touch src/lib.rs src/main.rs \
    && cargo build --release --locked --bin agui-a2a-gateway

FROM debian:bookworm-slim
# Not pinning Debian package versions (DL3008): a stable release only takes security fixes,
# and the mirror drops a revision once a fix supersedes it, so a pinned
# ca-certificates=<revision> would break the build at the next update (it already moved from
# 20230311+deb12u1 to 20250419~deb12u2 within bookworm). The debian:bookworm-slim tag pins the
# release; CA roots should be the newest it has.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid gateway --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin gateway
COPY --from=build /src/target/release/agui-a2a-gateway /usr/local/bin/agui-a2a-gateway
COPY config/gateway.example.yaml /etc/agui-a2a-gateway/gateway.example.yaml
# Numeric, so runtimes that require a non-root user (runAsNonRoot) can verify it.
USER 10001:10001
EXPOSE 8080
# Loopback by default, even inside the container: the gateway (and its demo agent) answer
# nobody outside until you say so. To expose it, set GATEWAY_LISTEN=0.0.0.0:8080 at run time
# (docker run -e GATEWAY_LISTEN=0.0.0.0:8080 -p 8080:8080 ...) and put it behind something
# that authenticates callers, or configure inbound auth (--api-key, or auth: in a config
# file). Without inbound auth a non-loopback address also needs --insecure-no-auth
# (docs/design.md#2-running-it-and-configuration): pass it only when what is in front authenticates. The environment overrides a config
# file's listen:, so in a container set the address here, where the healthcheck reads it.
ENV GATEWAY_LISTEN=127.0.0.1:8080
# The binary checks its own GET /healthz at GATEWAY_LISTEN (0.0.0.0 checked as 127.0.0.1):
# no curl in the image. 3 s timeout inside the binary.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["agui-a2a-gateway", "--healthcheck"]
# Exec form keeps the gateway PID 1, so SIGTERM reaches it: it stops accepting, lets open runs
# finish for timeouts.shutdown_drain (20 s by default), then ends. Give `docker stop` /
# Kubernetes a longer grace period than the drain (e.g. docker stop -t 30).
STOPSIGNAL SIGTERM
ENTRYPOINT ["agui-a2a-gateway"]
CMD ["--demo"]
