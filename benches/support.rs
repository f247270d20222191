//! What the benchmarks share (`benches/gateway.rs`, `benches/store.rs`): ports, CPU time of a
//! process, percentiles, the test PKI, and the demo agent in a process of its own.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub(crate) fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// User + system CPU time of a process so far, in clock ticks (/proc/<pid>/stat fields 14
/// and 15; the fields after the parenthesised command name start at field 3).
pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after_comm
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    fields.iter().sum()
}

/// Clock ticks per second (`getconf CLK_TCK`), and whether it had to be assumed.
pub(crate) fn clock_ticks_per_s() -> (f64, bool) {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .map_or((100.0, true), |t| (t, false))
}

/// A CA, and a certificate for 127.0.0.1 it signed with its key, as PEM files in `dir`:
/// (CA, certificate, key).
pub(crate) fn write_test_pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().expect("a CA key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    // OpenSSL (Redis's TLS) wants a CA that says it signs certificates, and names apart.
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "benchmark CA");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().expect("a server key");
    let mut leaf =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("server parameters");
    leaf.distinguished_name
        .push(rcgen::DnType::CommonName, "127.0.0.1");
    let leaf = leaf
        .signed_by(&key, &issuer)
        .expect("the server certificate");
    std::fs::create_dir_all(dir).expect("the benchmark's TLS directory");
    let files = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    for (path, pem) in [
        (&files.0, ca_cert.pem()),
        (&files.1, leaf.pem()),
        (&files.2, key.serialize_pem()),
    ] {
        std::fs::write(path, pem).expect("write a PEM file");
    }
    files
}

/// The demo agent in a process of its own (the gateway binary with `--demo`), so the
/// upstream shares no process with the gateway or the readers: the process and its URL, the
/// one the binary logs.
pub(crate) fn spawn_demo_agent() -> (Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_agui-a2a-gateway"))
        .args(["--demo", "--listen", &format!("127.0.0.1:{}", free_port())])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the demo agent");
    // Its log (tracing writes to stderr) names the demo agent's URL.
    let mut lines = std::io::BufReader::new(child.stderr.take().expect("its stderr")).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| {
            let at = line.find("demo agent listening")?;
            let url = line[at..].split("url=").nth(1)?;
            Some(url.split_whitespace().next()?.trim_matches('"').to_owned())
        })
        .expect("the demo agent's URL in its log");
    // The rest of its log is read and dropped, so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, url)
}
