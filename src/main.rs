//! `agui-a2a-gateway`: command line, logging, then build and serve
//! (docs/design.md#2-running-it-and-configuration).

use std::path::PathBuf;
use std::process::ExitCode;

use agui_a2a_gateway::{app, config};
use clap::{CommandFactory, FromArgMatches, Parser, ValueEnum};

/// jemalloc returns freed memory to the system within seconds (its decay, run by its
/// background threads); glibc's allocator kept the fragments of a burst of large runs
/// (measured: ten concurrent 1 MiB-state runs left RSS at 132 MiB with glibc, back to
/// 12 MiB ten seconds later with jemalloc; mimalloc kept 259 MiB). See docs/security.md.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A stateless gateway between AG-UI clients and A2A agents.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Config file (YAML, or TOML by extension).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on, HOST:PORT (its help, naming the default, is set by [`cli`]).
    #[arg(long, env = "GATEWAY_LISTEN", value_name = "ADDR")]
    listen: Option<String>,
    /// An upstream A2A agent, NAME=URL (base URL or card URL); repeatable.
    #[arg(long = "agent", value_name = "NAME=URL")]
    agents: Vec<String>,
    /// Also run the built-in demo A2A agent, registered as agent `demo`.
    #[arg(long)]
    demo: bool,
    /// A browser origin allowed to call the gateway (CORS), e.g. https://app.example;
    /// repeatable. None by default.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// An inbound API key, NAME=REF: NAME is the caller identity, REF the key (env:VAR,
    /// file:/path or the key itself); repeatable. Clients send `Authorization: Bearer <key>`.
    #[arg(long = "api-key", value_name = "NAME=REF")]
    api_keys: Vec<config::Secret>,
    /// Allow a non-loopback --listen without inbound auth (only behind something that
    /// authenticates callers).
    #[arg(long)]
    insecure_no_auth: bool,
    /// Binding store: memory or redis://HOST:PORT[/DB].
    #[arg(long, env = "GATEWAY_BINDING_STORE", value_name = "STORE")]
    binding_store: Option<String>,
    /// Check the configuration and exit.
    #[arg(long)]
    validate_only: bool,
    /// GET /healthz of the gateway at the listen address (0.0.0.0 or [::] as loopback) and
    /// exit 0 on 200, else 1: the container's HEALTHCHECK, needing no curl in the image.
    #[arg(long)]
    healthcheck: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tower_http=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

/// `--healthcheck`: the listen address as serving resolves it (flag or env, then the config
/// file, then the default; a host name's first address), an unspecified address checked on
/// loopback; 3 s in all, no proxy.
async fn healthcheck(cli: &Cli) -> ExitCode {
    let from_file = cli
        .config
        .as_deref()
        .and_then(|path| config::read_file(path).ok())
        .and_then(|file| file.listen);
    let raw = config::listen_or_default(cli.listen.clone(), from_file);
    let mut addr = match config::listen_addresses(&raw) {
        Ok(addrs) => addrs[0],
        Err(e) => {
            println!("unhealthy: {e}");
            return ExitCode::FAILURE;
        }
    };
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let url = format!("http://{addr}/healthz");
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build();
    let status = match client {
        Ok(c) => c.get(&url).send().await.map(|r| r.status()),
        Err(e) => Err(e),
    };
    match status {
        Ok(s) if s == reqwest::StatusCode::OK => {
            println!("healthy: GET {url} -> {s}");
            ExitCode::SUCCESS
        }
        Ok(s) => {
            println!("unhealthy: GET {url} -> {s}");
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("unhealthy: GET {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The command line: [`Cli`], its `--listen` help naming [`config::DEFAULT_LISTEN`].
fn cli() -> clap::Command {
    Cli::command().mut_arg("listen", |arg| {
        arg.help(format!(
            "Address to listen on, HOST:PORT; a host name listens on every address it \
             resolves to [default: {}]",
            config::DEFAULT_LISTEN
        ))
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::from_arg_matches(&cli().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if cli.healthcheck {
        return healthcheck(&cli).await;
    }
    init_logging(cli.log_format);
    let file = match &cli.config {
        Some(path) => match config::read_file(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => config::FileConfig::default(),
    };
    let overrides = config::Overrides {
        listen: cli.listen,
        otlp_endpoint: std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok(),
        binding_store: cli.binding_store,
        cors_origins: cli.cors_origins,
        agents: cli.agents,
        demo: cli.demo,
        api_keys: cli.api_keys,
        insecure_no_auth: cli.insecure_no_auth,
    };
    let settings = match config::settings(file, overrides) {
        Ok(s) => s,
        Err(errors) => {
            for e in errors.iter() {
                eprintln!("error: {e}");
            }
            return ExitCode::from(2);
        }
    };
    if cli.validate_only {
        println!(
            "configuration is valid: {} agent(s)",
            settings.agents.len() + usize::from(settings.demo)
        );
        return ExitCode::SUCCESS;
    }
    let listen = settings.listen.clone();
    let app = match app::build(settings).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let listeners = match app::bind(&listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let addrs: Vec<String> = listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .map(|a| a.to_string())
        .collect();
    for addr in &addrs {
        tracing::info!(%addr, "agui-a2a-gateway listening");
    }
    let addr = addrs.first().cloned().unwrap_or_default();
    for agent in app.registry.all() {
        tracing::info!(agent = %agent.settings.name, "POST http://{addr}/agents/{}", agent.settings.name);
    }
    match app.serve_all(listeners, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
