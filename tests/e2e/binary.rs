//! The gateway binary in a process of its own, for the tests that need a real process: a
//! signal, a restart, its exit, its log at a given level.
//!
//! Invariant: it is found by the address it logged it bound (its "agui-a2a-gateway
//! listening" line, src/main.rs), never by a port picked free beforehand: such a port may
//! be taken by another test's peer before the gateway binds it, and the test would then
//! talk to that peer or to a gateway that exited. Its files (config, log, stdout) live in a
//! directory of its own, removed with it; the process is killed when it is dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{tail, wait_until};

/// The message of the line the binary logs for each address it listens on (src/main.rs).
const LISTENING: &str = "agui-a2a-gateway listening";

/// How long the binary may take to log that it listens.
const STARTUP: Duration = Duration::from_secs(30);

/// A directory of this test's own, removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "agui-e2e-{}-{}-{tag}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The address of the first "listening" line of a log written with `--log-format json`.
pub fn listening_addr(log: &str) -> Option<String> {
    log.lines().find_map(|line| {
        let line: Value = serde_json::from_str(line).ok()?;
        let fields = &line["fields"];
        (fields["message"] == LISTENING)
            .then(|| fields["addr"].as_str().map(str::to_owned))
            .flatten()
    })
}

/// What to start: the config (YAML or JSON text), more arguments, more environment, the log
/// filter (`RUST_LOG`) and the address to listen on.
pub struct Launch<'a> {
    pub config: &'a str,
    pub args: &'a [&'a str],
    pub env: &'a [(&'a str, &'a str)],
    /// `RUST_LOG`; below `info`, the gateway's own info lines are kept (the listening line
    /// is one).
    pub log: &'a str,
    /// `127.0.0.1:0` unless a restart must come back where the clients expect it.
    pub listen: &'a str,
}

impl Default for Launch<'_> {
    fn default() -> Self {
        Launch {
            config: "{}",
            args: &[],
            env: &[],
            log: "warn",
            listen: "127.0.0.1:0",
        }
    }
}

/// The binary with `config` and its built-in demo agent, ready (`/readyz?strict` 200).
pub async fn demo_binary(config: &Value, tag: &str) -> GatewayBinary {
    Launch {
        config: &config.to_string(),
        args: &["--demo"],
        ..Launch::default()
    }
    .start(tag)
    .await
    .ready()
    .await
}

/// The running binary. Fields drop in order: the process is killed before its files go.
pub struct GatewayBinary {
    /// `http://<the address it bound>`.
    pub base: String,
    pub child: tokio::process::Child,
    dir: TempDir,
}

impl Launch<'_> {
    /// Starts the binary and returns once it listens (its agents' cards may still be being
    /// read: wait for `/readyz?strict` where that matters). Panics with its log if it exits
    /// first or does not listen within [`STARTUP`].
    pub async fn start(self, tag: &str) -> GatewayBinary {
        let dir = TempDir::new(tag);
        let config = dir.path().join("gateway.yaml");
        std::fs::write(&config, self.config).unwrap();
        let filter = match self.log {
            "warn" | "error" | "off" => format!("{},agui_a2a_gateway=info", self.log),
            level => level.to_owned(),
        };
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agui-a2a-gateway"))
            .arg("--config")
            .arg(&config)
            .args(self.args)
            .args(["--listen", self.listen, "--log-format", "json"])
            .env("RUST_LOG", filter)
            .envs(self.env.iter().copied())
            .stdout(std::fs::File::create(dir.path().join("gateway.out")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("gateway.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("start the gateway binary");
        let mut gateway = GatewayBinary {
            base: String::new(),
            child,
            dir,
        };
        let started = Instant::now();
        gateway.base = loop {
            if let Some(addr) = listening_addr(&gateway.log()) {
                break format!("http://{addr}");
            }
            if let Some(exit) = gateway.child.try_wait().unwrap() {
                panic!("the gateway binary exited ({exit}): {}", gateway.log_tail());
            }
            assert!(
                started.elapsed() < STARTUP,
                "the gateway binary did not listen within {STARTUP:?}: {}",
                gateway.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        gateway
    }
}

impl GatewayBinary {
    /// `127.0.0.1:<port>`, where a restart listens again.
    pub fn addr(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    pub fn agent_url(&self, name: &str) -> String {
        format!("{}/agents/{name}", self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Everything it wrote, stderr (the log) then stdout.
    pub fn log(&self) -> String {
        let read = |name| std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        read("gateway.log") + &read("gateway.out")
    }

    pub fn log_tail(&self) -> String {
        tail(&self.log(), 3000).to_owned()
    }

    /// Waits until `/readyz?strict` answers 200: every agent's card read.
    pub async fn ready(self) -> Self {
        let url = format!("{}/readyz?strict", self.base);
        wait_until(
            "the gateway binary is ready",
            STARTUP,
            async || match reqwest::get(&url).await {
                Ok(r) if r.status() == 200 => Ok(()),
                Ok(r) => Err(format!(
                    "{}: {}",
                    r.status(),
                    r.text().await.unwrap_or_default()
                )),
                Err(e) => Err(format!("{e}: {}", self.log_tail())),
            },
        )
        .await;
        self
    }

    /// Kills it and waits until it is gone (its port free for a restart).
    pub async fn stop(mut self) {
        self.child.kill().await.expect("stop the gateway");
    }

    /// Panics with its log if the process has exited.
    pub fn assert_alive(&mut self) {
        let exited = self.child.try_wait().unwrap();
        assert!(
            exited.is_none(),
            "the gateway process died ({exited:?}): {}",
            self.log_tail()
        );
    }
}
