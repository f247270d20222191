//! What a newcomer runs first works as written: the README's set-up commands, its approval
//! example (run with bash and curl against a demo gateway), and the example config's check
//! with the environment its header documents.

use std::collections::BTreeSet;
use std::process::Command;

use crate::support::*;

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

/// The README's ```sh blocks, in order.
fn sh_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for line in text.lines() {
        match (&mut open, line.trim_end()) {
            (None, "```sh") => open = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                open = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The gateway binary with `args`, as `cargo run --release -- args` would run it, plus
/// `--validate-only`: whether the flags parse and the configuration they make is valid.
fn validates(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agui-a2a-gateway"))
        .args(args)
        .arg("--validate-only")
        .current_dir(root())
        .env_remove("GATEWAY_LISTEN")
        .env_remove("GATEWAY_BINDING_STORE")
        .output()
        .expect("run the gateway binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The first screen's block holds exactly the two set-up commands: the gateway on its demo
/// agent (flags the binary takes) and the test suite (a script that is there); and no
/// README command calls an `agui-a2a-gateway` that nothing installed.
#[test]
fn the_readme_set_up_commands_work_as_written() {
    let text = readme();
    let blocks = sh_blocks(&text);
    let commands: Vec<&str> = blocks[0]
        .lines()
        .map(|l| l.split("  #").next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands.len(), 2, "two set-up commands: {commands:?}");
    let (gateway, tests) = (commands[0], commands[1]);
    let args = gateway
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("{gateway:?} runs the gateway with cargo run"));
    let args: Vec<&str> = args.split_whitespace().collect();
    assert!(args.contains(&"--demo"), "{gateway}");
    let (ok, out) = validates(&args);
    assert!(ok, "{gateway}: {out}");
    assert_eq!(tests, "bash scripts/test");
    let script = root().join("scripts/test");
    let syntax = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(syntax.success(), "{}", script.display());
    for block in &blocks {
        for line in block.lines() {
            assert!(
                !line.trim_start().starts_with("agui-a2a-gateway "),
                "not installed by the README's steps: {line}"
            );
        }
    }
}

/// The README's approval example, run as written (bash, curl) against a demo gateway: the
/// first run's interrupt id is read from its stream and the second run answers it.
#[tokio::test]
async fn the_readme_approval_example_works_as_written() {
    let text = readme();
    let block = sh_blocks(&text)
        .into_iter()
        .find(|b| b.contains("\"resume\""))
        .expect("the README's approval example");
    let gw = Gateway::start("{}", true).await;
    let script = block.replace("http://127.0.0.1:8080", &gw.base);
    assert_ne!(
        script, block,
        "the example calls the gateway at 127.0.0.1:8080"
    );
    let out = tokio::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .output()
        .await
        .expect("bash (and curl) run the README's example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = stdout.lines().next().unwrap_or_default();
    assert!(id.starts_with("a2a:"), "the interrupt id first: {stdout}");
    assert!(stdout.contains(r#""delta":"Approved: yes""#), "{stdout}");
    assert!(
        stdout.contains(r#""outcome":{"type":"success"}"#),
        "{stdout}"
    );
}

/// Every `env:NAME` the example config reads, and the names its header exports: the same.
/// With them set it passes `--validate-only`; without them the check names each at once.
#[test]
fn the_example_config_validates_with_its_documented_environment() {
    let path = "config/gateway.example.yaml";
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    let documented: BTreeSet<&str> = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .filter_map(|l| l.trim_start_matches('#').trim().strip_prefix("export "))
        .flat_map(str::split_whitespace)
        .filter_map(|word| word.split_once('=').map(|(name, _)| name))
        .filter(|name| {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
        })
        .collect();
    let referenced: BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split(" #").next().unwrap())
        .flat_map(|l| l.split("env:").skip(1))
        .map(|rest| {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    assert!(!referenced.is_empty());
    assert_eq!(documented, referenced, "the header's exports");
    let run = |set: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agui-a2a-gateway"));
        cmd.args(["--config", path, "--validate-only"])
            .current_dir(root())
            .env_remove("GATEWAY_LISTEN")
            .env_remove("GATEWAY_BINDING_STORE")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
        for name in &referenced {
            if set {
                // What the header's `openssl rand -hex 32` gives: 64 hex digits.
                cmd.env(name, "0123456789abcdef".repeat(4));
            } else {
                cmd.env_remove(name);
            }
        }
        let out = cmd.output().expect("run the gateway binary");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, out) = run(true);
    assert!(ok, "{out}");
    assert!(out.contains("configuration is valid"), "{out}");
    let (ok, out) = run(false);
    assert!(!ok, "{out}");
    for name in &referenced {
        assert!(
            out.contains(&format!("environment variable {name} is not set")),
            "{name}: {out}"
        );
    }
}

/// The README's Layout names every top-level folder (`docs/`) and every module of `src/`
/// (`src/run.rs`, `src/run/`), like the crate's header names every module: a folder or a
/// module added is a folder or a module described.
#[test]
fn the_readme_layout_names_every_folder_and_module() {
    let text = readme();
    let layout = text
        .split("## Layout\n\n```\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a Layout section");
    let names = |dir: &std::path::Path, prefix: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter_map(|e| {
                let name = e.file_name().into_string().unwrap();
                let is_dir = e.file_type().unwrap().is_dir();
                match () {
                    _ if name.starts_with('.') || name == "target" => None,
                    _ if is_dir => Some(format!("{prefix}{name}/")),
                    _ if !prefix.is_empty() && name.ends_with(".rs") => {
                        Some(format!("{prefix}{name}"))
                    }
                    _ => None,
                }
            })
            .collect();
        names.sort();
        names
    };
    let root = root();
    let mut expected = names(&root, "");
    expected.extend(names(&root.join("src"), "src/"));
    // `src/` is named by its modules; every other name as itself.
    let words: Vec<&str> = layout
        .split(|c: char| c.is_whitespace() || c == ',')
        .collect();
    let missing: Vec<&String> = expected
        .iter()
        .filter(|name| {
            !words
                .iter()
                .any(|word| word == name || (name.as_str() == "src/" && word.starts_with("src/")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "README's Layout does not name {missing:?}"
    );
}
