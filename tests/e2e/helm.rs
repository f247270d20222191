//! The Helm chart's pod, run without a cluster (deploy/helm/agui-a2a-gateway/README.md):
//! `tests/helm/render.py` (helm-python-sdk, in `tests/helm/.venv`) renders the chart with a
//! values file of `tests/helm/values/`; the ConfigMap and Secret files are written where the
//! pod mounts them, under a temporary directory (every mount path, and every mention of it in
//! the container's args and the ConfigMap's files, moved under it alike); the gateway binary
//! runs with the container's args and environment, as the pod's uid/gid when this test runs
//! as root, in a working directory it cannot write. It listens on `127.0.0.1:0` in place of
//! the rendered `GATEWAY_LISTEN=0.0.0.0:8080`, found by the address it logs (as
//! tests/e2e/binary.rs finds it; this pod runs with std's `Command` for its uid and gid).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use crate::binary::listening_addr;
use crate::support::{require, root, sse_events, tail};

/// The image's PATH (Dockerfile: debian:bookworm-slim's default).
const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The chart rendered with `values` (a file of tests/helm/values/): every object.
fn render(values: &str) -> Vec<Value> {
    let python = require(
        &root().join("tests/helm/.venv/bin/python"),
        "the chart's test venv (tests/helm/requirements.lock)",
    );
    let out = Command::new(python)
        .arg(root().join("tests/helm/render.py"))
        .arg(root().join("tests/helm/values").join(values))
        .output()
        .expect("run tests/helm/render.py");
    assert!(
        out.status.success(),
        "render {values}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("render.py prints a JSON list")
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered (an existingSecret is not)"))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

fn chown_group(path: &Path, gid: Option<u32>) {
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid)).unwrap();
    }
}

/// The rendered gateway pod, laid out under a temporary directory and ready to start.
struct Pod {
    dir: PathBuf,
    /// Its Deployment's pod spec and gateway container, as rendered.
    spec: Value,
    container: Value,
    bin: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// The address the started gateway bound (its "listening" log line).
    addr: OnceLock<String>,
    /// uid/gid to run as (runAsUser/runAsGroup) when this test runs as root.
    ids: Option<(u32, u32)>,
    /// The generated API key (Secret <fullname>-api-key), if rendered.
    api_key: Option<String>,
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Pod {
    fn new(values: &str) -> Self {
        let objs = render(values);
        let deployment = objs
            .iter()
            .find(|o| {
                o["kind"] == "Deployment"
                    && o["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with("agui-a2a-gateway"))
            })
            .expect("the gateway's Deployment");
        let spec = deployment["spec"]["template"]["spec"].clone();
        let container = spec["containers"][0].clone();
        let dir = std::env::temp_dir().join(format!(
            "helm-pod-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let root_run = is_root();
        let group = root_run.then(|| spec["securityContext"]["fsGroup"].as_u64().unwrap() as u32);

        let mounts: Vec<(String, String)> = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_owned(),
                    m["mountPath"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        // Every mount path moves under `dir`, in paths and in the files that name them.
        let rehome = |s: &str| {
            mounts.iter().fold(s.to_owned(), |s, (_, path)| {
                s.replace(path.as_str(), &format!("{}{path}", dir.display()))
            })
        };
        let mut api_key = None;
        for (name, path) in &mounts {
            let target = PathBuf::from(format!("{}{path}", dir.display()));
            std::fs::create_dir_all(&target).unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
            let volume = spec["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == name.as_str())
                .unwrap_or_else(|| panic!("no volume {name}"));
            if let Some(cm) = volume.get("configMap") {
                // A ConfigMap volume: every key a file, mode 0644.
                let cm = find(&objs, "ConfigMap", cm["name"].as_str().unwrap());
                for (key, text) in cm["data"].as_object().unwrap() {
                    let file = target.join(key);
                    std::fs::write(&file, rehome(text.as_str().unwrap())).unwrap();
                    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))
                        .unwrap();
                }
            } else if let Some(projected) = volume.get("projected") {
                let mode = projected["defaultMode"].as_u64().unwrap_or(0o644) as u32;
                for source in projected["sources"].as_array().unwrap() {
                    let secret = &source["secret"];
                    let object = find(&objs, "Secret", secret["name"].as_str().unwrap());
                    let data = object["data"].as_object().unwrap();
                    // items: only these keys, at these paths; else every key by its name.
                    let items: Vec<(String, String)> = match secret["items"].as_array() {
                        Some(items) => items
                            .iter()
                            .map(|i| {
                                (
                                    i["key"].as_str().unwrap().to_owned(),
                                    i["path"].as_str().unwrap().to_owned(),
                                )
                            })
                            .collect(),
                        None => data.keys().map(|k| (k.clone(), k.clone())).collect(),
                    };
                    for (key, file) in items {
                        let bytes = base64::engine::general_purpose::STANDARD
                            .decode(data[&key].as_str().unwrap())
                            .unwrap();
                        if key == "api-key" {
                            api_key = Some(String::from_utf8(bytes.clone()).unwrap());
                        }
                        let file = target.join(file);
                        std::fs::write(&file, bytes).unwrap();
                        // The kubelet's fsGroup: the files belong to that group.
                        chown_group(&file, group);
                        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))
                            .unwrap();
                    }
                }
            } else {
                panic!("volume {name}: neither a ConfigMap nor a projected Secret");
            }
        }

        // The image's binary, where the image has it.
        let bin = dir.join("usr/local/bin/agui-a2a-gateway");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::fs::copy(env!("CARGO_BIN_EXE_agui-a2a-gateway"), &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        for d in ["usr", "usr/local", "usr/local/bin"] {
            std::fs::set_permissions(dir.join(d), std::fs::Permissions::from_mode(0o755)).unwrap();
        }

        let args: Vec<String> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| rehome(a.as_str().unwrap()))
            .collect();
        let container_port = container["ports"][0]["containerPort"].as_u64().unwrap();
        let env = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let (name, value) = (e["name"].as_str().unwrap(), e["value"].as_str().unwrap());
                if name == "GATEWAY_LISTEN" {
                    assert_eq!(value, format!("0.0.0.0:{container_port}"));
                    (name.to_owned(), "127.0.0.1:0".to_owned())
                } else {
                    (name.to_owned(), value.to_owned())
                }
            })
            .collect();
        let ids = root_run.then(|| {
            let sc = &container["securityContext"];
            let uid = sc["runAsUser"].as_u64().unwrap() as u32;
            let gid = sc["runAsGroup"].as_u64().unwrap() as u32;
            // Kubernetes adds fsGroup to the process's groups; std sets one gid, so they
            // must be the same here for the Secret's files (mode 0440) to be readable.
            assert_eq!(Some(gid), group, "runAsGroup and fsGroup differ");
            (uid, gid)
        });
        Pod {
            dir,
            spec,
            container,
            bin,
            args,
            env,
            addr: OnceLock::new(),
            ids,
            api_key,
        }
    }

    /// The container's command with `extra` args, its environment only, from a directory it
    /// cannot write (the image's root filesystem is read-only).
    fn command(&self, extra: &[&str]) -> Command {
        let workdir = self.dir.join("workdir");
        std::fs::create_dir_all(&workdir).unwrap();
        std::fs::set_permissions(&workdir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args)
            .args(extra)
            .env_clear()
            .env("PATH", IMAGE_PATH)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&workdir);
        if let Some((uid, gid)) = self.ids {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    fn url(&self, path: &str) -> String {
        let addr = self
            .addr
            .get()
            .expect("the gateway listens (Running::listening)");
        format!("http://{addr}{path}")
    }

    /// A probe's URL: its httpGet path on the port its name resolves to (mapped to ours).
    fn probe(&self, probe: &str) -> String {
        let get = &self.container[probe]["httpGet"];
        let port = &get["port"];
        let named = self.container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| &p["name"] == port || &p["containerPort"] == port);
        assert!(named, "{probe}: port {port} is not the container's");
        self.url(get["path"].as_str().unwrap())
    }
}

/// Runs `exec` (a spawn of the pod's copied binary) again while it fails with `ETXTBSY`: a
/// process forked by another test's thread while the copy was being written holds the
/// written file open until it execs (the kernel refuses to exec a file open for writing), a
/// few milliseconds at most.
fn unless_busy<T>(mut exec: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    let mut tries = 0;
    loop {
        match exec() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            done => return done,
        }
    }
}

async fn status(client: &reqwest::Client, url: &str) -> Option<u16> {
    match client.get(url).send().await {
        Ok(r) => Some(r.status().as_u16()),
        Err(_) => None,
    }
}

/// The started gateway, killed if the test ends early, and its log (JSON lines on stderr).
struct Running {
    child: Child,
    log: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    fn start(pod: &Pod) -> Self {
        let log = pod.dir.join("gateway.log");
        let mut command = pod.command(&[]);
        command
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let child = unless_busy(|| command.spawn()).expect("start the gateway");
        Running { child, log }
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address it logged it listens on, once it has.
    fn listening(&self) -> Option<String> {
        listening_addr(&self.logs())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rendered_pod_serves_the_demo_behind_its_key_and_drains_on_sigterm() {
    let pod = Pod::new("defaults.yaml");
    let key = pod
        .api_key
        .clone()
        .expect("defaults.yaml renders the API key");
    let mut gw = Running::start(&pod);
    let pid = gw.child.id();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();

    // The startup probe's budget: periodSeconds x failureThreshold.
    let startup = &pod.container["startupProbe"];
    let budget = Duration::from_secs(
        startup["periodSeconds"].as_u64().unwrap() * startup["failureThreshold"].as_u64().unwrap(),
    );
    let started = Instant::now();
    let starting = |gw: &mut Running, what: &str| {
        assert!(
            gw.child.try_wait().unwrap().is_none(),
            "exited: {}",
            gw.logs()
        );
        assert!(
            started.elapsed() < budget,
            "{what} after {budget:?}: {}",
            gw.logs()
        );
    };
    let addr = loop {
        if let Some(addr) = gw.listening() {
            break addr;
        }
        starting(&mut gw, "not listening");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    pod.addr.set(addr).unwrap();
    while status(&client, &pod.probe("startupProbe")).await != Some(200) {
        starting(&mut gw, "startup probe failing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        status(&client, &pod.probe("livenessProbe")).await,
        Some(200)
    );
    let ready_by = Instant::now() + Duration::from_secs(10);
    while status(&client, &pod.probe("readinessProbe")).await != Some(200) {
        assert!(Instant::now() < ready_by, "never ready: {}", gw.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Some((uid, _)) = pod.ids {
        let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = proc_status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        assert_eq!(
            line.split_whitespace().nth(1),
            Some(uid.to_string().as_str())
        );
    }

    // Nobody without the key; the key sees the demo agent.
    assert_eq!(status(&client, &pod.url("/agents")).await, Some(401));
    let agents: Value = client
        .get(pod.url("/agents"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(agents.to_string().contains("\"demo\""), "{agents}");

    // A streaming run (slow 60: 60 ticks 100 ms apart), open when SIGTERM comes and still
    // open when readiness has failed, however loaded the machine.
    let body = json!({"threadId": "t1", "runId": "r1", "protocolVersion": "1.0",
        "messages": [{"id": "m1", "role": "user", "content": "slow 60"}]});
    let raw = Arc::new(Mutex::new(String::new()));
    let reader = {
        let raw = raw.clone();
        let mut resp = reqwest::Client::new()
            .post(pod.url("/agents/demo"))
            .bearer_auth(&key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        tokio::spawn(async move {
            while let Ok(Some(chunk)) = resp.chunk().await {
                raw.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk));
            }
        })
    };
    let streaming_by = Instant::now() + Duration::from_secs(10);
    while !raw.lock().unwrap().contains("TEXT_MESSAGE_CONTENT") {
        assert!(
            Instant::now() < streaming_by,
            "the run did not stream: {}",
            gw.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The kubelet, after preStop: SIGTERM. Readiness fails at once (no new runs are sent
    // here), the open run finishes, and the process is gone within the grace period that is
    // left after the preStop sleep.
    let grace = pod.spec["terminationGracePeriodSeconds"].as_u64().unwrap();
    let sleep: u64 = pod.container["lifecycle"]["preStop"]["exec"]["command"][1]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let kill = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let sigterm = Instant::now();
    // At once, as the kubelet sees it: before its next readiness probe (the signal is handled
    // asynchronously, and a loaded machine may take a moment to run the handler).
    let period = Duration::from_secs(
        pod.container["readinessProbe"]["periodSeconds"]
            .as_u64()
            .unwrap(),
    );
    let ready = loop {
        let ready = status(&client, &pod.probe("readinessProbe")).await;
        if ready != Some(200) {
            break ready;
        }
        assert!(
            sigterm.elapsed() < period,
            "still ready {period:?} after SIGTERM: {}",
            gw.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // docs/operations.md#readiness: 503 while the run drains, the listener still serving.
    assert_eq!(
        ready,
        Some(503),
        "readiness {:?} after SIGTERM (None: connection refused): {}",
        sigterm.elapsed(),
        gw.logs()
    );
    assert!(
        !raw.lock().unwrap().contains("RUN_FINISHED"),
        "the run had ended before readiness failed ({:?} after SIGTERM)",
        sigterm.elapsed()
    );

    let left = Duration::from_secs(grace - sleep);
    let exit = loop {
        if let Some(exit) = gw.child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            sigterm.elapsed() < left,
            "still running {left:?} after SIGTERM (terminationGracePeriodSeconds {grace} - preStop {sleep} s): {}",
            gw.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "exit {exit:?}: {}", gw.logs());
    tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the stream ends")
        .unwrap();
    let raw = raw.lock().unwrap().clone();
    let events = sse_events(&raw);
    let last = events.last().expect("events");
    assert_eq!(last["type"], "RUN_FINISHED", "{}", tail(&raw, 600));
    assert_eq!(last["outcome"]["type"], "success", "{last}");
    eprintln!(
        "stopped {:?} after SIGTERM (budget {left:?}); the run ended with RUN_FINISHED",
        sigterm.elapsed()
    );
}

/// Every values file of the matrix renders a config the gateway accepts, with its files
/// where the pod has them. (managed-redis.yaml uses binding_store's map form, docs/design.md
/// §2.)
#[test]
fn every_rendered_config_passes_validate_only() {
    let mut failed = Vec::new();
    let mut files: Vec<String> = std::fs::read_dir(root().join("tests/helm/values"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 7, "{files:?}");
    for values in &files {
        let pod = Pod::new(values);
        let mut command = pod.command(&["--validate-only"]);
        let out = unless_busy(|| command.output()).expect("run --validate-only");
        if !out.status.success() {
            failed.push(format!(
                "{values}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
