//! One inbound HTTP/1.1 connection: request heads read and parsed, each request handed to the
//! router, its response written (the accept loop and its limits are [`super::listener`]'s).
//!
//! Why not hyper's server (measured, docs/performance.md): a hyper connection keeps an 8 KiB
//! read buffer and an 8 KiB header buffer for its whole life (not configurable below 8 KiB),
//! two thirds of an open SSE stream's heap. Here a connection holds received bytes only while
//! they wait to be parsed and a response's bytes only until they are written, so an open,
//! quiet stream holds no buffer at all. Framing rules are [`crate::http1`]'s.
//!
//! Rules (RFC 9112; docs/design.md#9-reliability-and-limits for the limits; the framing rules
//! and the one request boundary are [`crate::http1`]'s, docs/security.md "HTTP/1.1 framing"):
//! - a head ends where `httparse` ends it and is parsed within [`http1::MAX_HEAD_BYTES`] and
//!   [`http1::MAX_HEADERS`]; a head that does not parse or has a line not ended by CRLF gets
//!   `400 malformed_request`, one too large `431 request_head_too_large`, one that stalls
//!   `408 head_timeout` (an idle keep-alive connection is just closed), each followed by the
//!   connection's close; only CRLF empty lines before a request line are skipped;
//! - a request body is `Transfer-Encoding: chunked` (the only coding accepted: others get
//!   `501`) or `Content-Length` (one header, one number), else empty. Both headers, a list,
//!   or a coding list that is not a list of tokens get `400`: the request-smuggling shapes.
//!   The body is read as the handler asks, so a route that reads it only once it holds a run
//!   slot costs nothing before; `Expect: 100-continue` is answered at that first read; a
//!   chunked body outside RFC 9112 §7.1 fails the read with [`BodyError::Framing`] (the
//!   handler answers `400 malformed_request`, the connection closes), and its trailers count
//!   towards `limits.max_body_bytes` with its payload;
//! - a response has `Content-Length` when its body's size is known, else chunked framing
//!   (HTTP/1.0: until the connection closes); none for HEAD, 1xx, 204 and 304;
//! - keep-alive for HTTP/1.1 unless either side says `Connection: close`, for HTTP/1.0 only
//!   with `Connection: keep-alive` and a response of known length (RFC 9112 §9.3); a
//!   connection whose request body was not read to its end closes (what is left of it cannot
//!   be told from a next request);
//! - a client that closes its connection while its response is pending or streaming ends
//!   that response: the handler or body is dropped, which ends a run (cancel on disconnect).
//!   Bytes a client sends meanwhile (a pipelined request) wait, up to a head's bound;
//! - `timeouts.header_read` bounds each head, from the connection's start or the previous
//!   response's end; a write that makes no progress for `timeouts.client_write` ends the
//!   connection (which drops the response body, and with it a run);
//! - shutdown: an idle connection closes at once; a response in flight is finished first.

use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response};
use axum::http::{StatusCode, Uri, Version};
use axum::response::IntoResponse;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};

use crate::error::RequestError;
use crate::http1::{self, Framing};

/// The room a read makes in the receive buffer.
const READ_SIZE: usize = 4 * 1024;
/// A response's gathered bytes are written once they reach this size (or its body waits).
const WRITE_CHUNK: usize = 64 * 1024;
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// What the accept loop ([`super::listener`]) and its connections enforce.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub max_connections: usize,
    /// `limits.max_body_bytes`: a request body's trailers count towards it (the handler
    /// bounds the payload).
    pub max_body_bytes: usize,
    pub header_read: Duration,
    pub client_write: Duration,
}

/// Serves the connection `tcp` from `peer` until it closes, an error ends it, or `shutdown`
/// turns `true` while it is idle; its `slot` of `limits.max_connections` is held till then.
pub(crate) async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    router: axum::Router,
    limits: ConnectionLimits,
    mut shutdown: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    let conn = Arc::new(Connection {
        tcp,
        inbound: Mutex::new(Inbound::default()),
        max_body_bytes: limits.max_body_bytes,
    });
    let mut served = 0;
    loop {
        served += 1;
        // Reading a head and running the handler are boxed: this task's future is then
        // sized by what an open stream needs, not by those steps (memory per open stream).
        let next = next_response(&conn, &router, peer, limits, &mut shutdown, served);
        let Some((response, asked, mut keep_alive)) = Box::pin(next).await else {
            return close(conn).await;
        };
        if conn.lock().body.is_some() {
            keep_alive = false;
        }
        let written = write_response(&conn, response, asked, &mut keep_alive, limits);
        if let Err(e) = written.await {
            tracing::debug!(%peer, error = %e, "connection ended");
            return;
        }
        if !keep_alive || *shutdown.borrow() {
            return close(conn).await;
        }
    }
}

/// What a response's framing depends on in its request.
#[derive(Debug, Clone, Copy, Default)]
struct Asked {
    /// A HEAD request: no body.
    head: bool,
    /// An HTTP/1.0 request: no chunked framing.
    http10: bool,
}

/// Reads the next request head and runs the router on its request: the response, what its
/// request asked of the framing, and whether the connection may stay open. `None` when the
/// connection is to close: the client closed it or went away, shutdown came while it was
/// idle, or its head was refused (the refusal is written here).
async fn next_response(
    conn: &Arc<Connection>,
    router: &axum::Router,
    peer: SocketAddr,
    limits: ConnectionLimits,
    shutdown: &mut watch::Receiver<bool>,
    number: u64,
) -> Option<(Response<Body>, Asked, bool)> {
    let head = tokio::select! {
        biased;
        head = tokio::time::timeout(limits.header_read, conn.read_head()) => head,
        // Idle (no byte of a next head yet): close at once.
        _ = shutdown.wait_for(|down| *down), if conn.lock().buf.is_empty() => return None,
    };
    let refusal = match head {
        Ok(Ok(Some(head))) => {
            let asked = Asked {
                head: head.method == Method::HEAD,
                http10: head.version == Version::HTTP_10,
            };
            let keep_alive = head.keep_alive;
            let call =
                tower::ServiceExt::oneshot(router.clone(), head.into_request(conn, number, peer));
            return tokio::select! {
                biased;
                response = call => match response {
                    Ok(response) => Some((response, asked, keep_alive)),
                    Err(never) => match never {},
                },
                () = conn.client_gone() => None,
            };
        }
        Ok(Ok(None)) => return None,
        Ok(Err(HeadError::Io(e))) => {
            tracing::debug!(%peer, error = %e, "connection ended");
            return None;
        }
        Ok(Err(HeadError::Refused(error))) => error,
        Err(_) if conn.lock().buf.is_empty() => return None,
        Err(_) => RequestError::HeadTimeout(limits.header_read),
    };
    let mut keep_alive = false;
    let _ = write_response(
        conn,
        refusal.into_response(),
        Asked::default(),
        &mut keep_alive,
        limits,
    )
    .await;
    None
}

/// A connection's socket, and what it received that is not parsed yet; shared by the
/// connection's task and the body of its current request.
struct Connection {
    tcp: TcpStream,
    inbound: Mutex<Inbound>,
    /// `limits.max_body_bytes`, which a body's trailers count towards.
    max_body_bytes: usize,
}

#[derive(Default)]
struct Inbound {
    /// Received bytes not parsed yet (let go whenever empty).
    buf: Vec<u8>,
    /// The current request's body, while some of it is still to be read.
    body: Option<Framing>,
    /// Which request the body is of (a body outliving its request reads nothing more).
    request: u64,
    /// `Expect: 100-continue`, answered at the body's first read.
    expects_continue: bool,
}

enum HeadError {
    Io(io::Error),
    Refused(RequestError),
}

/// A parsed request head.
pub(super) struct Head {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    framing: Option<Framing>,
    keep_alive: bool,
    expects_continue: bool,
}

impl Connection {
    fn lock(&self) -> MutexGuard<'_, Inbound> {
        self.inbound.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads what the socket has into `inbound.buf`; 0 at the end of the stream. Room is
    /// made only once the socket is readable, so a connection waiting for bytes holds none.
    fn poll_fill(&self, inbound: &mut Inbound, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.tcp.poll_read_ready(cx))?;
            inbound.buf.reserve(READ_SIZE);
            match self.tcp.try_read_buf(&mut inbound.buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if inbound.buf.is_empty() {
                        inbound.buf = Vec::new();
                    }
                }
                read => return Poll::Ready(read),
            }
        }
    }

    /// Reads the next request head; `None` if the client closed before sending one.
    async fn read_head(&self) -> Result<Option<Head>, HeadError> {
        let mut searched = 0;
        poll_fn(|cx| {
            let mut inbound = self.lock();
            loop {
                // RFC 9112 §2.2: empty lines (CRLF) before a request line are ignored.
                let blank = 2 * inbound
                    .buf
                    .chunks(2)
                    .take_while(|pair| *pair == b"\r\n")
                    .count();
                if blank > 0 {
                    http1::consume(&mut inbound.buf, blank);
                    searched = 0;
                }
                match http1::find_head(&inbound.buf, &mut searched) {
                    Ok(Some(len)) => {
                        let head = parse_head(&inbound.buf[..len]).map_err(HeadError::Refused);
                        http1::consume(&mut inbound.buf, len);
                        return Poll::Ready(head.map(Some));
                    }
                    Ok(None) => {}
                    Err(http1::HeadTooLarge) => {
                        let too_large = RequestError::HeadTooLarge(http1::MAX_HEAD_BYTES);
                        return Poll::Ready(Err(HeadError::Refused(too_large)));
                    }
                }
                match ready!(self.poll_fill(&mut inbound, cx)) {
                    Ok(0) if inbound.buf.is_empty() => return Poll::Ready(Ok(None)),
                    Ok(0) => {
                        let closed = io::Error::from(io::ErrorKind::UnexpectedEof);
                        return Poll::Ready(Err(HeadError::Io(closed)));
                    }
                    Ok(_) => {}
                    Err(e) => return Poll::Ready(Err(HeadError::Io(e))),
                }
            }
        })
        .await
    }

    /// Resolves when the client has closed the connection (or it broke) while its response is
    /// pending. Reads only once the request body is read (before, the handler owns the
    /// bytes); what it reads waits for the next head, up to a head's bound.
    async fn client_gone(&self) {
        poll_fn(|cx| {
            let mut inbound = self.lock();
            loop {
                if inbound.body.is_some() || inbound.buf.len() > http1::MAX_HEAD_BYTES {
                    return Poll::Pending;
                }
                match ready!(self.poll_fill(&mut inbound, cx)) {
                    Ok(0) | Err(_) => return Poll::Ready(()),
                    Ok(_) => {}
                }
            }
        })
        .await
    }

    /// Writes all of `bytes`; fails if the client accepts none for `client_write`.
    async fn write_all(&self, mut bytes: &[u8], client_write: Duration) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.tcp.try_write(bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Boxed: only a client that does not keep up gets here, and the timer
                    // would otherwise size every open stream's future.
                    Box::pin(tokio::time::timeout(client_write, self.tcp.writable()))
                        .await
                        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The request of `head` (RFC 9112 §3, §6), or why it is refused.
pub(super) fn parse_head(bytes: &[u8]) -> Result<Head, RequestError> {
    use RequestError::{HeadTooLarge, MalformedRequest};
    http1::check_line_endings(bytes).map_err(|e| MalformedRequest(e.0))?;
    let mut slots = [httparse::EMPTY_HEADER; http1::MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut slots);
    match parsed.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(MalformedRequest("an incomplete head")),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadTooLarge(http1::MAX_HEAD_BYTES)),
        Err(_) => {
            return Err(MalformedRequest(
                "a request line or header that does not parse",
            ))
        }
    }
    let method = Method::from_bytes(parsed.method.unwrap_or_default().as_bytes())
        .map_err(|_| MalformedRequest("a method that is not a token"))?;
    let uri = parsed
        .path
        .unwrap_or_default()
        .parse::<Uri>()
        .map_err(|_| MalformedRequest("a request target that is not a URI"))?;
    let version = match parsed.version {
        Some(1) => Version::HTTP_11,
        _ => Version::HTTP_10,
    };
    let mut headers = HeaderMap::with_capacity(parsed.headers.len());
    for h in parsed.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| MalformedRequest("a header name that is not a token"))?;
        let value = HeaderValue::from_bytes(h.value)
            .map_err(|_| MalformedRequest("a header value with control characters"))?;
        headers.append(name, value);
    }
    let framing = request_framing(&headers, version)?;
    let connection = header_tokens(&headers, &header::CONNECTION);
    // RFC 9112 §9.3: HTTP/1.1 persists unless "close"; HTTP/1.0 only with "keep-alive".
    let keep_alive = !connection.iter().any(|t| t == "close")
        && (version == Version::HTTP_11 || connection.iter().any(|t| t == "keep-alive"));
    let expects_continue = version == Version::HTTP_11
        && framing.is_some()
        && headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    Ok(Head {
        method,
        uri,
        version,
        headers,
        framing,
        keep_alive,
        expects_continue,
    })
}

/// How a request's body ends (RFC 9112 §6.3), `None` for no body.
fn request_framing(headers: &HeaderMap, version: Version) -> Result<Option<Framing>, RequestError> {
    use RequestError::MalformedRequest;
    let codings = http1::transfer_codings(
        headers
            .get_all(header::TRANSFER_ENCODING)
            .into_iter()
            .map(HeaderValue::as_bytes),
    )
    .map_err(|e| MalformedRequest(e.0))?;
    if headers.contains_key(header::TRANSFER_ENCODING) {
        // §6.1: a request with both is the request-smuggling shape; HTTP/1.0 has no codings;
        // a final coding other than chunked leaves the length unknown (400).
        if headers.contains_key(header::CONTENT_LENGTH) {
            return Err(MalformedRequest(
                "both Transfer-Encoding and Content-Length",
            ));
        }
        if version != Version::HTTP_11 {
            return Err(MalformedRequest("Transfer-Encoding in an HTTP/1.0 request"));
        }
        if !http1::ends_in_chunked(&codings) {
            return Err(MalformedRequest(
                "a Transfer-Encoding that does not end in chunked",
            ));
        }
        if codings.len() > 1 {
            return Err(RequestError::UnsupportedTransferEncoding);
        }
        return Ok(Some(Framing::chunked()));
    }
    let values = headers.get_all(header::CONTENT_LENGTH).into_iter();
    Ok(
        match http1::content_length(values.map(HeaderValue::as_bytes)) {
            Err(why) => return Err(MalformedRequest(why.0)),
            Ok(None | Some(0)) => None,
            Ok(Some(n)) => Some(Framing::Length(n)),
        },
    )
}

/// The comma-separated tokens of every `name` header ([`http1::tokens`]).
fn header_tokens(headers: &HeaderMap, name: &HeaderName) -> Vec<String> {
    http1::tokens(headers.get_all(name).into_iter().map(HeaderValue::as_bytes))
}

impl Head {
    /// The router's request: this head, its body read from `conn` as the handler asks.
    fn into_request(self, conn: &Arc<Connection>, number: u64, peer: SocketAddr) -> Request<Body> {
        let size_hint = match self.framing {
            None => SizeHint::with_exact(0),
            Some(Framing::Length(n)) => SizeHint::with_exact(n),
            Some(_) => SizeHint::default(),
        };
        let ended = self.framing.is_none();
        {
            let mut inbound = conn.lock();
            inbound.body = self.framing;
            inbound.request = number;
            inbound.expects_continue = self.expects_continue;
        }
        let body = RequestBody {
            conn: conn.clone(),
            request: number,
            size_hint,
            ended,
            read: 0,
        };
        let mut request = Request::new(Body::new(body));
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers;
        // Handlers learn the client's address (anonymous callers' rate-limit bucket).
        request.extensions_mut().insert(super::ClientAddr(peer));
        request
    }
}

/// A request body, read from its connection as the handler polls it.
struct RequestBody {
    conn: Arc<Connection>,
    request: u64,
    size_hint: SizeHint,
    ended: bool,
    /// Payload bytes handed to the handler so far.
    read: usize,
}

/// Why a request body could not be read. The handler answers the first two
/// (`error::RequestError::MalformedRequest`, `BodyTooLarge`); the connection then closes, as
/// its body was not read to the end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// Chunked framing outside RFC 9112 §7.1.
    #[error("a malformed HTTP request body: {0}")]
    Framing(http1::FramingError),
    /// The payload and its trailers over `limits.max_body_bytes`.
    #[error("the request body and its trailers exceed limits.max_body_bytes")]
    TooLarge,
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let conn = &*this.conn;
        let mut guard = conn.lock();
        let inbound = &mut *guard;
        if inbound.request != this.request {
            this.ended = true;
            return Poll::Ready(None);
        }
        if std::mem::take(&mut inbound.expects_continue) {
            // RFC 9110 §10.1.1: the client waits for this before it sends the body. Nothing
            // else has been written yet, so the socket takes these few bytes at once; if it
            // did not, the client sends the body after its own wait.
            let _ = conn.tcp.try_write(CONTINUE);
        }
        loop {
            let Some(framing) = inbound.body.as_mut() else {
                this.ended = true;
                return Poll::Ready(None);
            };
            let mut payload = Vec::new();
            // A framing error leaves `body` set: the connection closes after the response.
            let used =
                http1::decode(framing, &inbound.buf, &mut payload).map_err(BodyError::Framing)?;
            this.read += payload.len();
            if this.read.saturating_add(framing.trailer_bytes()) > conn.max_body_bytes {
                return Poll::Ready(Some(Err(BodyError::TooLarge)));
            }
            if framing.ended() {
                inbound.body = None;
            }
            http1::consume(&mut inbound.buf, used);
            if !payload.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(payload)))));
            }
            if inbound.body.is_none() {
                this.ended = true;
                return Poll::Ready(None);
            }
            if ready!(conn.poll_fill(inbound, cx))? == 0 {
                let e = "the connection closed before the request body ended";
                let closed = io::Error::new(io::ErrorKind::UnexpectedEof, e);
                return Poll::Ready(Some(Err(closed.into())));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        self.size_hint
    }
}

/// How a response's body is framed on the wire.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Out {
    None,
    Length,
    Chunked,
    UntilClose,
}

/// Writes `response`; `keep_alive` turns false when the connection must close after it.
/// The head is encoded here, so the future that streams the body holds only the body.
fn write_response<'a>(
    conn: &'a Connection,
    response: Response<Body>,
    asked: Asked,
    keep_alive: &mut bool,
    limits: ConnectionLimits,
) -> impl Future<Output = io::Result<()>> + 'a {
    use http_body::Body as _;
    let (parts, body) = response.into_parts();
    let status = parts.status;
    let length = body.size_hint().exact();
    let is_head = asked.head;
    let framing = if is_head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Out::None
    } else if length.is_some() {
        Out::Length
    } else if *keep_alive && !asked.http10 {
        Out::Chunked
    } else {
        Out::UntilClose
    };
    if header_tokens(&parts.headers, &header::CONNECTION)
        .iter()
        .any(|t| t == "close")
    {
        *keep_alive = false;
    }
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        // Framing and connection management are this server's; a HEAD answer keeps the
        // length its GET would have (RFC 9110 §9.3.2).
        let framing_header = name == header::TRANSFER_ENCODING
            || name == header::CONNECTION
            || (name == header::CONTENT_LENGTH && !is_head);
        if !framing_header {
            http1::push_header(&mut out, name.as_str(), value.as_bytes());
        }
    }
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    http1::push_header(&mut out, "date", date.as_bytes());
    match (framing, length) {
        (Out::Length, Some(n)) => {
            http1::push_header(&mut out, "content-length", n.to_string().as_bytes())
        }
        (Out::Chunked, _) => http1::push_header(&mut out, "transfer-encoding", b"chunked"),
        _ => {}
    }
    if !*keep_alive || framing == Out::UntilClose {
        *keep_alive = false;
        http1::push_header(&mut out, "connection", b"close");
    } else if asked.http10 {
        http1::push_header(&mut out, "connection", b"keep-alive");
    }
    out.extend_from_slice(b"\r\n");
    write_body(conn, out, body, framing, limits.client_write)
}

/// Writes `out` (a response head) and then `body`, framed as `framing` says.
async fn write_body(
    conn: &Connection,
    mut out: Vec<u8>,
    mut body: Body,
    framing: Out,
    client_write: Duration,
) -> io::Result<()> {
    use http_body::Body as _;
    if framing == Out::None {
        return conn.write_all(&out, client_write).await;
    }
    loop {
        // What the body has ready is gathered (up to WRITE_CHUNK) and written when it waits.
        let next = poll_fn(|cx| loop {
            if out.len() >= WRITE_CHUNK {
                return Poll::Ready(Next::Write);
            }
            match Pin::new(&mut body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers are not sent (no route has any).
                    if let Ok(data) = frame.into_data() {
                        push_data(&mut out, &data, framing);
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Next::Failed(e.to_string())),
                Poll::Ready(None) => return Poll::Ready(Next::End),
                Poll::Pending if !out.is_empty() => return Poll::Ready(Next::Write),
                Poll::Pending => return Poll::Pending,
            }
        });
        let next = tokio::select! {
            biased;
            next = next => next,
            () = conn.client_gone() => return Err(io::Error::from(io::ErrorKind::ConnectionAborted)),
        };
        match next {
            Next::Write => {
                conn.write_all(&out, client_write).await?;
                out = Vec::new();
            }
            Next::End => {
                if framing == Out::Chunked {
                    out.extend_from_slice(b"0\r\n\r\n");
                }
                return conn.write_all(&out, client_write).await;
            }
            Next::Failed(e) => {
                // The response cannot be completed: without its last chunk (or with its
                // length short) the client sees it broke; the connection closes.
                let _ = conn.write_all(&out, client_write).await;
                return Err(io::Error::other(e));
            }
        }
    }
}

enum Next {
    Write,
    End,
    Failed(String),
}

/// Appends a body's `data` framed as `framing` says.
fn push_data(out: &mut Vec<u8>, data: &[u8], framing: Out) {
    if data.is_empty() {
        return;
    }
    if framing == Out::Chunked {
        out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(data);
    }
}

/// Ends the connection with a FIN after what was written (dropping a socket with unread
/// bytes would send a reset, which can destroy a response the client has not read yet).
async fn close(conn: Arc<Connection>) {
    if let Ok(conn) = Arc::try_unwrap(conn) {
        let mut tcp = conn.tcp;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut tcp).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use axum::routing::{get, post};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const LIMITS: ConnectionLimits = ConnectionLimits {
        max_connections: 16,
        max_body_bytes: 1 << 20,
        header_read: Duration::from_secs(5),
        client_write: Duration::from_secs(5),
    };

    /// Set when the streaming route's body is dropped.
    static STREAM_DROPPED: AtomicBool = AtomicBool::new(false);

    struct FlagOnDrop;
    impl Drop for FlagOnDrop {
        fn drop(&mut self) {
            STREAM_DROPPED.store(true, Ordering::SeqCst);
        }
    }

    /// An echo route, a fixed route and an endless stream.
    fn test_router() -> axum::Router {
        axum::Router::new()
            .route("/echo", post(|body: Bytes| async move { body }))
            .route("/hello", get(|| async { "hello" }))
            // Reads its body as the gateway's handlers do (its errors mapped the same way).
            .route(
                "/strict",
                post(|body: Body| async move {
                    let limit = LIMITS.max_body_bytes;
                    match axum::body::to_bytes(body, limit).await {
                        Ok(body) => body.into_response(),
                        Err(e) => crate::http::body_error(&e, limit).into_response(),
                    }
                }),
            )
            .route(
                "/stream",
                get(|| async {
                    let guard = FlagOnDrop;
                    let ticks = futures::stream::unfold(guard, |guard| async move {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Some((Ok::<_, io::Error>(Bytes::from_static(b"tick\n")), guard))
                    });
                    Body::from_stream(ticks)
                }),
            )
    }

    /// A server on 127.0.0.1 with [`test_router`].
    async fn start() -> SocketAddr {
        let router = test_router();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let closed = super::super::listener::serve(
                vec![listener],
                router,
                LIMITS,
                std::future::pending(),
            )
            .await;
            closed.await;
        });
        addr
    }

    /// Sends `request` and reads until the server closes, `idle` passes without a byte, or
    /// three seconds have passed; what it said, and whether it closed.
    async fn exchange(addr: SocketAddr, request: &[u8], idle: Duration) -> (String, bool) {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(request).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while std::time::Instant::now() < deadline {
            match tokio::time::timeout(idle, tcp.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into(), true),
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
                Err(_) => return (String::from_utf8_lossy(&got).into(), false),
            }
        }
        (String::from_utf8_lossy(&got).into(), false)
    }

    #[tokio::test]
    async fn pipelined_requests_are_answered_in_order_on_one_connection() {
        let addr = start().await;
        let request = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nfirstGET /hello HTTP/1.1\r\nHost: x\r\n\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nsec\r\n3;x=y\r\nond\r\n0\r\nTrailer: t\r\n\r\n";
        let (said, closed) = exchange(addr, request, Duration::from_millis(300)).await;
        assert!(!closed, "the connection stays open: {said}");
        let bodies: Vec<&str> = said
            .split("HTTP/1.1 200 OK\r\n")
            .skip(1)
            .map(|r| r.split("\r\n\r\n").nth(1).unwrap())
            .collect();
        assert_eq!(bodies, ["first", "hello", "second"], "{said}");
        assert!(
            said.contains("content-length: 5\r\n") && said.contains("date: "),
            "{said}"
        );
    }

    #[tokio::test]
    async fn expect_continue_is_answered_when_the_body_is_read() {
        let addr = start().await;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
        )
        .await
        .unwrap();
        let mut buf = [0u8; 256];
        let n = tokio::time::timeout(Duration::from_secs(2), tcp.read(&mut buf))
            .await
            .expect("100 Continue before the body")
            .unwrap();
        assert_eq!(&buf[..n], CONTINUE);
        tcp.write_all(b"ok").await.unwrap();
        let n = tcp.read(&mut buf).await.unwrap();
        let said = String::from_utf8_lossy(&buf[..n]);
        assert!(
            said.starts_with("HTTP/1.1 200 OK") && said.ends_with("\r\n\r\nok"),
            "{said}"
        );
    }

    #[tokio::test]
    async fn hostile_framing_is_refused_with_a_json_error_and_a_close() {
        let addr = start().await;
        let long_header = format!(
            "GET /hello HTTP/1.1\r\nx: {}\r\n\r\n",
            "a".repeat(http1::MAX_HEAD_BYTES)
        );
        let many_headers = format!(
            "GET /hello HTTP/1.1\r\n{}\r\n",
            "x: y\r\n".repeat(http1::MAX_HEADERS + 1)
        );
        let cases: Vec<(Vec<u8>, &str, &str)> = vec![
            (b"POST /echo HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"POST /echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd".to_vec(), "400", "malformed_request"),
            (b"POST /echo HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc".to_vec(), "400", "malformed_request"),
            (b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".to_vec(), "501", "unsupported_transfer_encoding"),
            (b"POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"GET /hello HTTP/1.1\r\nbad header\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(), "400", "malformed_request"),
            (long_header.into_bytes(), "431", "request_head_too_large"),
            (many_headers.into_bytes(), "431", "request_head_too_large"),
            // Issue 18's reproductions: one request boundary (a head ended by a bare LF is
            // refused, not read with a boundary of its own), strict lists, strict chunks.
            (b"GET /hello HTTP/1.1\r\nHost: x\n\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"POST /strict HTTP/1.1\r\nContent-Length: 5\n\nhelloGET /hello HTTP/1.1\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"GET /hello HTTP/1.1\r\nx: a\rb\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"\nGET /hello HTTP/1.1\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"POST /strict HTTP/1.1\r\nTransfer-Encoding: chunked,\r\n\r\n0\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"POST /strict HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello".to_vec(), "400", "malformed_request"),
            (b"POST /strict HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello".to_vec(), "400", "malformed_request"),
            (b"POST /strict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"POST /strict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2;x\rxx\r\n0\r\n\r\n".to_vec(), "400", "malformed_request"),
            (b"POST /strict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\n\nGET /hello HTTP/1.1\r\n\r\n".to_vec(), "400", "malformed_request"),
            (trailers_over_body_limit(), "413", "body_too_large"),
        ];
        for (request, status, code) in cases {
            let (said, closed) = exchange(addr, &request, Duration::from_secs(2)).await;
            let shown = String::from_utf8_lossy(&request[..request.len().min(80)]).into_owned();
            assert!(
                said.starts_with(&format!("HTTP/1.1 {status} ")),
                "{shown}: {said}"
            );
            assert!(
                said.contains(&format!("\"code\":\"{code}\"")),
                "{shown}: {said}"
            );
            assert!(closed, "{shown}: the connection closes");
        }
    }

    /// A chunked body whose trailers (within their own bound) take it over the body limit.
    fn trailers_over_body_limit() -> Vec<u8> {
        let payload = "a".repeat(LIMITS.max_body_bytes - 10);
        format!(
            "POST /strict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{payload}\r\n0\r\nx-t: {}\r\n\r\n",
            payload.len(),
            "b".repeat(64)
        )
        .into_bytes()
    }

    #[tokio::test]
    async fn http_1_0_and_head_requests_are_framed_for_them() {
        let addr = start().await;
        let (said, closed) =
            exchange(addr, b"GET /hello HTTP/1.0\r\n\r\n", Duration::from_secs(2)).await;
        assert!(closed && said.ends_with("\r\n\r\nhello"), "{said}");
        assert!(said.contains("connection: close\r\n"), "{said}");
        // HTTP/1.0 keep-alive (RFC 9112 §9.3): a known length keeps the connection.
        let (said, closed) = exchange(
            addr,
            b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /hello HTTP/1.0\r\n\r\n",
            Duration::from_secs(2),
        )
        .await;
        assert_eq!(said.matches("\r\n\r\nhello").count(), 2, "{said}");
        assert!(
            closed && said.contains("connection: keep-alive\r\n"),
            "{said}"
        );
        let (said, _) = exchange(
            addr,
            b"HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n",
            Duration::from_millis(300),
        )
        .await;
        assert!(
            said.starts_with("HTTP/1.1 200 OK") && said.ends_with("\r\n\r\n"),
            "{said}"
        );
        assert!(said.contains("content-length: 5\r\n"), "{said}");
        let (said, _) = exchange(
            addr,
            b"GET /stream HTTP/1.0\r\n\r\n",
            Duration::from_millis(100),
        )
        .await;
        assert!(
            !said.contains("transfer-encoding") && said.contains("tick\n"),
            "{said}"
        );
    }

    #[tokio::test]
    async fn a_client_that_goes_away_ends_its_streaming_response() {
        let addr = start().await;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).contains("transfer-encoding: chunked"));
        STREAM_DROPPED.store(false, Ordering::SeqCst);
        drop(tcp);
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !STREAM_DROPPED.load(Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "the body was not dropped"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Mutated requests (bytes flipped, cut, repeated; a small xorshift generator, seeded,
    /// so a failure replays) each end without a panic or a hang of their connection (each
    /// connection's task is joined), and the server answers a good request afterwards.
    #[tokio::test]
    async fn mutated_requests_never_panic_or_hang_a_connection() {
        const ROUNDS: usize = 200;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_closing, closing_seen) = watch::channel(false);
        let slots = Arc::new(tokio::sync::Semaphore::new(ROUNDS + 1));
        let accepting = tokio::spawn(async move {
            let mut connections = Vec::new();
            for _ in 0..=ROUNDS {
                let (tcp, peer) = listener.accept().await.unwrap();
                let slot = slots.clone().try_acquire_owned().unwrap();
                connections.push(tokio::spawn(serve_connection(
                    tcp,
                    peer,
                    test_router(),
                    LIMITS,
                    closing_seen.clone(),
                    slot,
                )));
            }
            connections
        });
        let seeds: [&[u8]; 3] = [
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
            b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            b"GET /hello HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..ROUNDS {
            let mut request = seeds[round % seeds.len()].to_vec();
            for _ in 0..=(next() % 4) {
                let at = (next() as usize) % request.len();
                match next() % 4 {
                    0 => request[at] = next() as u8,
                    1 => request.truncate(at.max(1)),
                    2 => request
                        .splice(
                            at..at,
                            [b'\r', b'\n', b'0', b':'][..(next() % 4) as usize + 1]
                                .iter()
                                .copied(),
                        )
                        .for_each(drop),
                    _ => {
                        let piece = request[at..].to_vec();
                        request.extend_from_slice(&piece);
                    }
                }
            }
            // A cut request may wait for the rest: the server may stay silent then; the
            // connection ends once the client leaves.
            exchange(addr, &request, Duration::from_millis(20)).await;
        }
        let (said, _) = exchange(
            addr,
            b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
            Duration::from_millis(200),
        )
        .await;
        assert!(
            said.starts_with("HTTP/1.1 200 OK") && said.ends_with("hello"),
            "{said}"
        );
        for (round, connection) in accepting.await.unwrap().into_iter().enumerate() {
            let ended = tokio::time::timeout(Duration::from_secs(5), connection).await;
            let ended = ended.unwrap_or_else(|_| panic!("connection {round} still open"));
            assert!(ended.is_ok(), "connection {round} panicked: {ended:?}");
        }
    }
}
