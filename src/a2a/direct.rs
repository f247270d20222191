//! A plain-HTTP/1.1 transport for upstream *streams* (`SendStreamingMessage`,
//! `SubscribeToTask`) to `http://` and `https://` upstreams: the request reqwest built, sent
//! over a TCP connection (TLS with the agent's configuration, `super::tls`) that the run's
//! own task reads.
//!
//! Why not reqwest/hyper here (measured, docs/performance.md): hyper's client reads the
//! connection in a task of its own and hands the body on through a one-chunk channel, so
//! every A2A event (servers write one HTTP chunk per SSE event) costs two task wake-ups
//! across threads; and each connection holds a request channel block (10 KiB) and two 8 KiB
//! buffers for the whole stream. Here the run's task reads the socket itself, all the events
//! one read brought are decoded in one go, and a stream holds one small read buffer. Over TLS
//! the same: rustls is read directly ([`read_tls`]), every record a read brings decrypted in
//! one go, no buffer of ours held while a stream is quiet.
//!
//! Scope: `http://` and `https://` URLs when no proxy is configured in the environment (see
//! [`proxy_configured`]); proxied upstreams stream through reqwest. Unary calls always go
//! through reqwest.
//!
//! Hostile upstreams (docs/design.md#9-reliability-and-limits): connecting is bounded by
//! `timeouts.connect`, the response head by the caller's head bound (or the first event's);
//! the head, chunk lines, extensions and trailers within [`crate::http1`]'s bounds and
//! grammar (the same request boundary and chunked rules as the inbound server: a head with a
//! bare LF is refused, not read with another boundary); the read buffer grows only while
//! reads fill it, to [`MAX_READ_BUFFER`]. A framing error ends the body after what was
//! decoded before it is handed on, and names itself ("a malformed chunked body: ...").
//! Nothing the upstream sends is echoed in errors.

use std::io::ErrorKind;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;

use super::tls::{AgentTls, Alpn, Connection};

use crate::http1::{self, decode, Framing, MAX_HEADERS, MAX_HEAD_BYTES};

/// A stream's first read buffer; doubled while reads fill it, up to [`MAX_READ_BUFFER`].
const FIRST_READ_BUFFER: usize = 4 * 1024;
const MAX_READ_BUFFER: usize = 256 * 1024;

/// True if the environment configures a proxy reqwest would use for `http://` or `https://`
/// URLs (then streams go through reqwest, which honours it).
pub(crate) fn proxy_configured() -> bool {
    [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

/// A response head and the connection its body is read from.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) content_type: Option<String>,
    pub(crate) body: Body,
}

/// Sends `request` (an `http://` URL) and reads the response head.
pub(crate) async fn send(
    request: &reqwest::Request,
    tls: &AgentTls,
    connect_timeout: Duration,
) -> Result<Response, String> {
    let url = request.url();
    let host = url.host_str().ok_or("the URL has no host")?;
    let connect = tls.connect(url, Alpn::Http1);
    let mut io = match tokio::time::timeout(connect_timeout, connect).await {
        Ok(Ok(io)) => io,
        Ok(Err(e)) => match tls.explain(&e) {
            Some(reason) => return Err(format!("cannot connect: {reason}")),
            None => return Err(format!("cannot connect: {e}")),
        },
        Err(_) => return Err(format!("cannot connect within {connect_timeout:?}")),
    };
    io.write_all(&request_bytes(request, host))
        .await
        .map_err(|e| format!("cannot send the request: {e}"))?;
    let mut buf = Vec::new();
    let mut read_size = FIRST_READ_BUFFER;
    loop {
        let head_len = read_head(&mut io, &mut buf, &mut read_size).await?;
        // RFC 9110 §15.2: interim responses (103 Early Hints, ...) precede the final one.
        if interim_status(&buf[..head_len]) {
            http1::consume(&mut buf, head_len);
            continue;
        }
        return parse_head(io, buf, head_len, read_size);
    }
}

/// Reads until `buf` holds a whole response head; its length. Each read's bytes are searched
/// once (a head trickling in a byte at a time costs no more than one arriving whole).
async fn read_head(
    io: &mut Connection,
    buf: &mut Vec<u8>,
    read_size: &mut usize,
) -> Result<usize, String> {
    let mut searched = 0;
    loop {
        match http1::find_head(buf, &mut searched) {
            Ok(Some(end)) => return Ok(end),
            Ok(None) => {}
            Err(http1::HeadTooLarge) => {
                return Err(format!("a response head over {MAX_HEAD_BYTES} bytes"))
            }
        }
        if read_more(io, buf, read_size).await? == 0 {
            return Err("the connection closed before a response head".into());
        }
    }
}

/// True for a 1xx head other than 101 (which this transport never asks for).
fn interim_status(head: &[u8]) -> bool {
    matches!(
        head.get(..10),
        Some([b'H', b'T', b'T', b'P', b'/', _, _, _, b' ', b'1'])
    ) && head.get(9..12) != Some(&b"101"[..])
}

/// The response of the head `buf[..head_len]`, its body read from `io`.
fn parse_head(
    io: Connection,
    mut buf: Vec<u8>,
    head_len: usize,
    read_size: usize,
) -> Result<Response, String> {
    let malformed = |e: http1::FramingError| format!("a malformed response head: {e}");
    http1::check_line_endings(&buf[..head_len]).map_err(malformed)?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut head = httparse::Response::new(&mut headers);
    match head.parse(&buf[..head_len]) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err("a malformed response head".into()),
    }
    let status = head.code.unwrap_or(0);
    let values = |name: &'static str| {
        head.headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    };
    let content_type = values("content-type")
        .next()
        .and_then(|v| std::str::from_utf8(v).ok())
        .map(|v| v.trim().to_owned());
    // RFC 9112 §6.3: chunked if it is the last transfer coding; any other coding: until the
    // connection closes; else a length, else until the connection closes. The lists as
    // strict as the inbound server's.
    let codings = http1::transfer_codings(values("transfer-encoding")).map_err(malformed)?;
    let framing = if http1::ends_in_chunked(&codings) {
        Framing::chunked()
    } else if !codings.is_empty() {
        Framing::Close
    } else {
        match http1::content_length(values("content-length")).map_err(malformed)? {
            Some(len) => Framing::Length(len),
            None => Framing::Close,
        }
    };
    http1::consume(&mut buf, head_len);
    Ok(Response {
        status,
        content_type,
        body: Body {
            io,
            buf,
            read_size,
            framing,
            done: false,
            failed: None,
        },
    })
}

/// The request line, headers and body of `request`, as HTTP/1.1 bytes.
fn request_bytes(request: &reqwest::Request, host: &str) -> Vec<u8> {
    let url = request.url();
    let body = request.body().and_then(|b| b.as_bytes()).unwrap_or(&[]);
    let mut out = Vec::with_capacity(512 + body.len());
    out.extend_from_slice(request.method().as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(url.path().as_bytes());
    if let Some(query) = url.query() {
        out.push(b'?');
        out.extend_from_slice(query.as_bytes());
    }
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    if let Some(port) = url.port() {
        out.extend_from_slice(format!(":{port}").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    for (name, value) in request.headers() {
        // Framing is this transport's: the body's length, and one response per connection.
        if http1::FRAMING_HEADERS.contains(name) {
            continue;
        }
        http1::push_header(&mut out, name.as_str(), value.as_bytes());
    }
    http1::push_header(
        &mut out,
        "content-length",
        body.len().to_string().as_bytes(),
    );
    http1::push_header(&mut out, "connection", b"close");
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// Reads what the socket has into `buf`, with room for `read_size` more bytes; the size
/// doubles while reads fill that room (to [`MAX_READ_BUFFER`]) and halves while they use
/// under a quarter of it (to [`FIRST_READ_BUFFER`]). Room is made only once the socket is
/// readable, so a quiet stream holds no buffer while it waits.
async fn read_more(
    io: &mut Connection,
    buf: &mut Vec<u8>,
    read_size: &mut usize,
) -> Result<usize, String> {
    let tcp = match io {
        Connection::Plain(tcp) => tcp,
        Connection::Tls(tls) => return read_tls(tls, buf, read_size).await,
    };
    let (n, room) = loop {
        tcp.readable().await.map_err(broke)?;
        buf.reserve(*read_size);
        let room = buf.capacity() - buf.len();
        match tcp.try_read_buf(buf) {
            Ok(n) => break (n, room),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if buf.is_empty() {
                    *buf = Vec::new();
                }
            }
            Err(e) => return Err(broke(e)),
        }
    };
    adapt_read_size(read_size, n, room);
    Ok(n)
}

/// [`read_more`] over TLS: what rustls has decrypted, else, once the socket is readable,
/// every record it brings (up to `read_size` bytes of them), decrypted into `buf` in one go.
/// Room is made only for decrypted bytes, so a quiet stream holds no buffer of ours while
/// it waits (rustls keeps its own record buffer, 4 KiB). tokio-rustls's reader is not used:
/// it needs room before it waits, and hands on one record per read.
async fn read_tls(
    tls: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    buf: &mut Vec<u8>,
    read_size: &mut usize,
) -> Result<usize, String> {
    let (tcp, conn) = tls.get_mut();
    let mut n = 0;
    loop {
        // An unclean close after decrypted bytes is told at the next read.
        match take_plaintext(conn, buf) {
            Ok(Plaintext::Moved(moved)) => n += moved,
            Ok(Plaintext::Waiting) => {}
            Ok(Plaintext::Closed) => break,
            Err(_) if n > 0 => break,
            Err(e) => return Err(broke(e)),
        }
        if n >= *read_size {
            break;
        }
        if n == 0 {
            tcp.readable().await.map_err(broke)?;
        }
        // At the connection's end too (0 bytes): rustls notes it, `take_plaintext` tells.
        match conn.read_tls(&mut TryRead(tcp)) {
            Ok(_) => {
                let processed = conn.process_new_packets();
                // What rustls has to say back (an alert, a key update), best effort.
                if conn.wants_write() {
                    let _ = conn.write_tls(&mut TryWrite(tcp));
                }
                processed.map_err(|e| broke(std::io::Error::new(ErrorKind::InvalidData, e)))?;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if n > 0 {
                    break;
                }
            }
            Err(e) => return Err(broke(e)),
        }
    }
    adapt_read_size(read_size, n, *read_size);
    Ok(n)
}

/// What [`take_plaintext`] found.
enum Plaintext {
    /// This many decrypted bytes, moved into the buffer (never 0).
    Moved(usize),
    /// None yet.
    Waiting,
    /// None, and the peer closed the connection cleanly (close_notify).
    Closed,
}

/// Moves every decrypted byte rustls holds into `buf`. An unclean close (the connection
/// ended without close_notify) is an error once no decrypted byte is left.
fn take_plaintext(
    conn: &mut rustls::ClientConnection,
    buf: &mut Vec<u8>,
) -> std::io::Result<Plaintext> {
    use std::io::BufRead;
    let mut moved = 0;
    loop {
        let found = match conn.reader().into_first_chunk() {
            Ok([]) if moved == 0 => return Ok(Plaintext::Closed),
            Ok([]) => break,
            Ok(chunk) => {
                buf.extend_from_slice(chunk);
                chunk.len()
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock && moved == 0 => {
                return Ok(Plaintext::Waiting)
            }
            Err(_) if moved > 0 => break,
            Err(e) => return Err(e),
        };
        conn.reader().consume(found);
        moved += found;
    }
    Ok(Plaintext::Moved(moved))
}

/// rustls reading the socket without waiting (`WouldBlock` when it has nothing).
struct TryRead<'a>(&'a tokio::net::TcpStream);

impl std::io::Read for TryRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.try_read(buf)
    }
}

/// rustls writing the socket without waiting.
struct TryWrite<'a>(&'a tokio::net::TcpStream);

impl std::io::Write for TryWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn broke(e: std::io::Error) -> String {
    format!("the connection broke: {e}")
}

/// The next read's size after a read of `n` bytes into `room`.
fn adapt_read_size(read_size: &mut usize, n: usize, room: usize) {
    if n == room {
        *read_size = (*read_size * 2).min(MAX_READ_BUFFER);
    } else if n < *read_size / 4 {
        *read_size = (*read_size / 2).max(FIRST_READ_BUFFER);
    }
}

/// A response body, read from the connection as the reader asks.
#[derive(Debug)]
pub(crate) struct Body {
    io: Connection,
    /// Received bytes not decoded yet (none held between reads once all are decoded).
    buf: Vec<u8>,
    /// How much the next read asks for ([`read_more`]).
    read_size: usize,
    framing: Framing,
    done: bool,
    /// A framing error found after payload that is handed on first.
    failed: Option<http1::FramingError>,
}

impl Body {
    /// The payload bytes of everything received so far (reading once if none is buffered),
    /// or `None` at the end of the body.
    pub(crate) async fn next_bytes(&mut self) -> Result<Option<Bytes>, String> {
        loop {
            if let Some(e) = self.failed.take() {
                self.done = true;
                return Err(format!("a malformed chunked body: {e}"));
            }
            if self.done {
                return Ok(None);
            }
            let mut out = Vec::new();
            match decode(&mut self.framing, &self.buf, &mut out) {
                Ok(consumed) => http1::consume(&mut self.buf, consumed),
                Err(e) => {
                    // What came before the error is still the upstream's: handed on first.
                    self.buf = Vec::new();
                    self.failed = Some(e);
                    if out.is_empty() {
                        continue;
                    }
                }
            }
            self.done = self.failed.is_none() && self.framing.ended();
            if !out.is_empty() {
                return Ok(Some(Bytes::from(out)));
            }
            if self.done {
                return Ok(None);
            }
            if read_more(&mut self.io, &mut self.buf, &mut self.read_size).await? == 0 {
                return match self.framing {
                    Framing::Close => {
                        self.done = true;
                        Ok(None)
                    }
                    _ => Err("the connection closed before the body ended".into()),
                };
            }
        }
    }

    /// The whole body, refusing more than `limit` bytes.
    pub(crate) async fn read_to_end(&mut self, limit: usize) -> Result<Option<Vec<u8>>, String> {
        let mut all = Vec::new();
        while let Some(bytes) = self.next_bytes().await? {
            if all.len() + bytes.len() > limit {
                return Ok(None);
            }
            all.extend_from_slice(&bytes);
        }
        Ok(Some(all))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// [`send`] of a GET of `url`, with the default trust, connecting within 5 s.
    async fn get(url: &str) -> Result<Response, String> {
        send(
            &request(url),
            AgentTls::default_trust(),
            Duration::from_secs(5),
        )
        .await
    }

    /// A one-shot server on 127.0.0.1 answering any request with `reply`, in pieces.
    async fn serve_once(reply: Vec<Vec<u8>>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut io, _) = listener.accept().await.unwrap();
            let mut request = vec![0; 4096];
            let _ = io.read(&mut request).await;
            for piece in reply {
                if io.write_all(&piece).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        format!("http://{addr}/rpc")
    }

    fn request(url: &str) -> reqwest::Request {
        reqwest::Client::new()
            .post(url)
            .json(&serde_json::json!({"jsonrpc": "2.0"}))
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_streamed_chunked_response_is_read_whole() {
        let url = serve_once(vec![
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nda".to_vec(),
            b"ta:\r\n3\r\n x\n\r\n1\r\n\n\r".to_vec(),
            b"\n0\r\n\r\n".to_vec(),
        ])
        .await;
        let mut resp = get(&url).await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.content_type.as_deref(), Some("text/event-stream"));
        let body = resp.body.read_to_end(1024).await.unwrap().unwrap();
        assert_eq!(body, b"data: x\n\n");
    }

    #[tokio::test]
    async fn interim_responses_and_a_trickled_head_are_read_through() {
        let head: &[u8] = b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        let url = serve_once(head.chunks(7).map(<[u8]>::to_vec).collect()).await;
        let mut resp = get(&url).await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body.read_to_end(10).await.unwrap().unwrap(), b"ok");
    }

    /// One request boundary upstream too (issue 18): a head ended by a bare LF is refused
    /// (it used to lose the first event), and a framing error hands on what came before it
    /// and then names itself.
    #[tokio::test]
    async fn bare_lf_heads_are_refused_and_framing_errors_come_after_their_payload() {
        let url = serve_once(vec![
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\n\ndata: first\n\n".to_vec(),
        ])
        .await;
        let err = get(&url).await.unwrap_err();
        assert!(err.contains("bare LF"), "{err}");

        for head in [
            &b"Transfer-Encoding: chunked,"[..],
            b"Content-Length: 5, 5",
            b"Content-Length: 5\r\nContent-Length: 5",
        ] {
            let reply = [&b"HTTP/1.1 200 OK\r\n"[..], head, b"\r\n\r\nhello"].concat();
            let url = serve_once(vec![reply]).await;
            let err = send(
                &request(&url),
                AgentTls::default_trust(),
                Duration::from_secs(5),
            )
            .await
            .unwrap_err();
            assert!(err.contains("malformed response head"), "{err}");
        }

        let url = serve_once(vec![
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: a\n\n\r\n9\ndata: b\n\n\r\n".to_vec(),
        ])
        .await;
        let mut resp = get(&url).await.unwrap();
        let first = resp.body.next_bytes().await.unwrap().unwrap();
        assert_eq!(&first[..], b"data: a\n\n");
        let err = resp.body.next_bytes().await.unwrap_err();
        assert!(
            err.contains("malformed chunked body") && err.contains("bare LF"),
            "{err}"
        );
        assert_eq!(resp.body.next_bytes().await, Ok(None));

        // A trailer flood is cut at the trailers' bound, not by the idle timeout.
        let flood = [
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"[..],
            &b"x-flood: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(400),
        ]
        .concat();
        let url = serve_once(vec![flood]).await;
        let mut resp = get(&url).await.unwrap();
        let err = resp.body.read_to_end(1024).await.unwrap_err();
        assert!(err.contains("trailers over their bound"), "{err}");
    }

    /// Over TLS as over plain TCP: one read takes every record the socket brought, all
    /// decrypted (a server writes one record per SSE event), and a quiet stream holds no
    /// buffer of ours while it waits (memory per open stream, docs/performance.md).
    #[tokio::test]
    async fn a_tls_read_takes_every_record_and_a_quiet_stream_holds_no_buffer() {
        use futures::FutureExt;
        use tokio::sync::oneshot;
        let (ca, leaf, key) = crate::a2a::tls::test_pki();
        let acceptor =
            tokio_rustls::TlsAcceptor::from(crate::demo::tls_config(vec![leaf], key).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/rpc", listener.local_addr().unwrap());
        let (go, go_rx) = oneshot::channel::<()>();
        let (written, written_rx) = oneshot::channel::<()>();
        let frame = b"9\r\ndata: a\n\n\r\n";
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut io = acceptor.accept(tcp).await.unwrap();
            let mut request = vec![0; 4096];
            let _ = io.read(&mut request).await;
            let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
            io.write_all(head).await.unwrap();
            let _ = go_rx.await;
            // One TLS record per write.
            for _ in 0..40 {
                io.write_all(frame).await.unwrap();
            }
            io.flush().await.unwrap();
            let _ = written.send(());
            let _ = io.read(&mut request).await;
        });
        let tls = AgentTls::new(&crate::a2a::tls::TlsTrust {
            extra_roots: vec![ca],
            ..Default::default()
        })
        .unwrap();
        let mut resp = send(&request(&url), &tls, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(resp.status, 200);
        go.send(()).unwrap();
        written_rx.await.unwrap();
        let bytes = resp.body.next_bytes().await.unwrap().unwrap();
        assert_eq!(String::from_utf8_lossy(&bytes), "data: a\n\n".repeat(40));
        assert!(resp.body.next_bytes().now_or_never().is_none(), "quiet");
        assert_eq!(resp.body.buf.capacity(), 0, "no room held while quiet");
    }

    #[tokio::test]
    async fn hostile_heads_and_bodies_fail_cleanly() {
        let huge_head = [
            b"HTTP/1.1 200 OK\r\nx: ".to_vec(),
            vec![b'a'; MAX_HEAD_BYTES + 10],
        ]
        .concat();
        let url = serve_once(vec![huge_head]).await;
        let err = get(&url).await.unwrap_err();
        assert!(err.contains("head over"), "{err}");

        let url = serve_once(vec![b"garbage\r\n\r\n".to_vec()]).await;
        let err = get(&url).await.unwrap_err();
        assert!(err.contains("malformed"), "{err}");

        // The connection ends inside a chunk: an error, not a short body.
        let url = serve_once(vec![
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc".to_vec(),
        ])
        .await;
        let mut resp = get(&url).await.unwrap();
        let err = resp.body.read_to_end(1024).await.unwrap_err();
        assert!(err.contains("closed before the body ended"), "{err}");

        // A body over the limit is refused, not buffered.
        let url = serve_once(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".to_vec(),
            vec![b'x'; 100],
        ])
        .await;
        let mut resp = get(&url).await.unwrap();
        assert_eq!(resp.body.read_to_end(10).await.unwrap(), None);
    }
}
