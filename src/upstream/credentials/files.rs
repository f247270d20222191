//! Header values read from files, read again when the file changes
//! (docs/security.md#upstream-credentials): `credentials.bearer: file:…` and every `file:`
//! reference in an agent's `headers`. Kubernetes rotates projected service-account tokens on
//! disk by swapping a symlink; a restart must not be needed.
//!
//! On every call the file is stat'ed (the symlink followed): when its identity changed
//! (modification and change times, length, inode and device) it is read again, at most
//! [`MAX_FILE_BYTES`], trimmed like any `file:` reference, and checked as a header value. A
//! file that cannot be read or holds no valid value keeps the value read before, with one
//! warning per distinct problem that names the path, never the value. A stat is a few
//! microseconds on the local (usually in-memory) volumes these files live on, so it is done
//! inline rather than on a blocking thread. [`WatchedFile::reread`] forces the next call to
//! read (the agent refused what was sent).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use reqwest::header::HeaderValue;

/// A credentials file larger than this is refused (a token is a few KiB).
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024;

/// What tells one version of a file from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    changed: (i64, i64),
    #[cfg(unix)]
    inode: (u64, u64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt as _;
        Self {
            modified: meta.modified().ok(),
            len: meta.len(),
            #[cfg(unix)]
            changed: (meta.ctime(), meta.ctime_nsec()),
            #[cfg(unix)]
            inode: (meta.dev(), meta.ino()),
        }
    }
}

#[derive(Default)]
struct State {
    /// The version `value` was read from (`None`: read on the next call).
    stamp: Option<Stamp>,
    value: Option<HeaderValue>,
    /// The problem last warned about, so a broken file warns once, not per call.
    warned: Option<String>,
}

/// One file whose content (as `render` makes it) is a header value.
pub(crate) struct WatchedFile {
    path: PathBuf,
    /// The header value of the file's (trimmed) content: `Bearer <it>`, or it as is.
    render: fn(&str) -> String,
    state: Mutex<State>,
}

impl std::fmt::Debug for WatchedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchedFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl WatchedFile {
    /// The file at `path`, its value rendered by `render`; `start`: its value when the
    /// configuration was read, used until a read succeeds.
    pub(crate) fn new(
        path: PathBuf,
        render: fn(&str) -> String,
        start: Option<HeaderValue>,
    ) -> Self {
        Self {
            path,
            render,
            state: Mutex::new(State {
                stamp: None,
                value: start.map(sensitive),
                warned: None,
            }),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The current value: read again if the file changed. `Err` only when no value was
    /// ever read.
    pub(crate) fn current(&self) -> Result<HeaderValue, String> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| "a credentials lock was poisoned".to_owned())?;
        let stamp = std::fs::metadata(&self.path).map(|m| Stamp::of(&m));
        let changed = match (&stamp, &state.stamp, &state.value) {
            (Ok(now), Some(before), Some(_)) => now != before,
            _ => true,
        };
        if changed {
            match stamp
                .map_err(|e| format!("cannot be read ({})", e.kind()))
                .and_then(|s| self.read().map(|v| (s, v)))
            {
                Ok((stamp, value)) => {
                    if state.warned.take().is_some() {
                        tracing::info!(path = %self.path.display(), "credentials file readable again");
                    }
                    state.stamp = Some(stamp);
                    state.value = Some(value);
                }
                Err(problem) => {
                    if state.warned.as_deref() != Some(&problem) {
                        tracing::warn!(path = %self.path.display(), problem = %problem,
                            kept = state.value.is_some(),
                            "credentials file not used; the value read before is kept");
                        state.warned = Some(problem.clone());
                    }
                    if state.value.is_none() {
                        return Err(format!("the file {} {problem}", self.path.display()));
                    }
                }
            }
        }
        state.value.clone().ok_or_else(|| "no value".to_owned())
    }

    /// The file's value now.
    fn read(&self) -> Result<HeaderValue, String> {
        let file = std::fs::File::open(&self.path)
            .map_err(|e| format!("cannot be read ({})", e.kind()))?;
        let mut raw = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut raw)
            .map_err(|e| format!("cannot be read ({})", e.kind()))?;
        if raw.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("is larger than {MAX_FILE_BYTES} bytes"));
        }
        let text = std::str::from_utf8(&raw).map_err(|_| "is not UTF-8 text".to_owned())?;
        let text = text.trim();
        if text.is_empty() {
            return Err("is empty".into());
        }
        HeaderValue::from_str(&(self.render)(text))
            .map(sensitive)
            .map_err(|_| "does not hold a valid header value".to_owned())
    }

    /// Whether the next call reads the file whatever its stamp.
    #[cfg(test)]
    pub(crate) fn will_reread(&self) -> bool {
        self.state.lock().unwrap().stamp.is_none()
    }

    /// The next call reads the file whether or not it changed.
    pub(crate) fn reread(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.stamp = None;
        }
    }
}

fn sensitive(mut v: HeaderValue) -> HeaderValue {
    v.set_sensitive(true);
    v
}

/// `Bearer <token>`.
pub(crate) fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The content as is.
pub(crate) fn verbatim(value: &str) -> String {
    value.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gw-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_rewritten_file_is_picked_up_and_a_broken_one_keeps_the_last_value() {
        let dir = dir("rewrite");
        let path = dir.join("token");
        std::fs::write(&path, "first\n").unwrap();
        let file = WatchedFile::new(path.clone(), bearer, None);
        assert_eq!(file.current().unwrap(), "Bearer first");
        assert!(file.current().unwrap().is_sensitive());
        std::fs::write(&path, "second-value").unwrap();
        assert_eq!(file.current().unwrap(), "Bearer second-value");
        // Same length, rewritten in place: the change time tells.
        std::fs::write(&path, "third-value!").unwrap();
        assert_eq!(file.current().unwrap(), "Bearer third-value!");
        for broken in [&b"bad\x07value"[..], b"", b"\xff\xfe"] {
            std::fs::write(&path, broken).unwrap();
            assert_eq!(file.current().unwrap(), "Bearer third-value!");
        }
        std::fs::write(&path, vec![b'a'; MAX_FILE_BYTES as usize + 1]).unwrap();
        assert_eq!(file.current().unwrap(), "Bearer third-value!");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            file.current().unwrap(),
            "Bearer third-value!",
            "kept while missing"
        );
        std::fs::write(&path, "fourth").unwrap();
        assert_eq!(file.current().unwrap(), "Bearer fourth");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_kubernetes_style_symlink_swap_is_followed() {
        // token -> ..data/token, ..data -> ..v1; the kubelet points ..data at ..v2.
        let dir = dir("swap");
        for (v, token) in [("..v1", "token-one"), ("..v2", "token-two")] {
            std::fs::create_dir(dir.join(v)).unwrap();
            std::fs::write(dir.join(v).join("token"), token).unwrap();
        }
        std::os::unix::fs::symlink("..v1", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/token", dir.join("token")).unwrap();
        let file = WatchedFile::new(dir.join("token"), verbatim, None);
        assert_eq!(file.current().unwrap(), "token-one");
        std::os::unix::fs::symlink("..v2", dir.join("..data_tmp")).unwrap();
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
        assert_eq!(file.current().unwrap(), "token-two");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_start_value_serves_until_a_read_and_none_is_an_error() {
        let dir = dir("start");
        let path = dir.join("absent");
        let file = WatchedFile::new(path.clone(), verbatim, Some(HeaderValue::from_static("v0")));
        assert_eq!(file.current().unwrap(), "v0");
        let none = WatchedFile::new(path.clone(), verbatim, None);
        let e = none.current().unwrap_err();
        assert!(
            e.contains("cannot be read (entity not found)") || e.contains("NotFound"),
            "{e}"
        );
        std::fs::write(&path, "v1").unwrap();
        assert_eq!(none.current().unwrap(), "v1");
        // Forced: read even though the file's stamp is the same (as after a change that a
        // coarse clock could not tell).
        assert_eq!(file.current().unwrap(), "v1");
        file.state.lock().unwrap().value = Some(HeaderValue::from_static("stale"));
        assert_eq!(file.current().unwrap(), "stale");
        file.reread();
        assert_eq!(file.current().unwrap(), "v1");
        let _ = std::fs::remove_dir_all(dir);
    }
}
