//! A small SSE reader for upstream A2A streams (WHATWG HTML §9.2.6, the parts A2A uses).
//!
//! Lines end in LF or CRLF (sse-starlette, used by a2a-sdk, sends CRLF; Express sends LF);
//! `:` comment lines (`: ping - <time>` keep-alives) are skipped; `data:` lines of one event
//! are joined with `\n`; `event:` is kept (A2A 1.0 marks errors with `event: error`); other
//! fields (`id:`, `retry:`) are ignored. Memory is bounded: an event, or an unterminated line,
//! longer than `limit` bytes is an error before it is buffered further; a quiet stream holds
//! no buffer. Events are handed to a decoder where they lie (no copy for one-line data).

use bytes::Bytes;
use futures::{Stream, StreamExt};

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub event: Option<String>,
    pub data: String,
}

/// Why an SSE stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("the stream broke: {0}")]
    Body(String),
    #[error("an event exceeds {limit} bytes")]
    TooLarge { limit: usize },
    #[error("an event is not UTF-8")]
    NotUtf8,
}

/// Incremental parser state; feed bytes with [`Parser::push`], take frames with
/// [`Parser::next_frame`] (owned) or [`Parser::next_with`] (decoded from a borrowed slice).
///
/// Per event the common case costs no copy: an event whose one `data:` line is already in
/// the read buffer is handed to the decoder where it lies; only data split over lines or
/// chunks is gathered into `data` (reused, and let go when an event made it large).
#[derive(Debug)]
pub struct Parser {
    buf: Vec<u8>,
    /// Start of the unparsed bytes in `buf`.
    pos: usize,
    /// The event's data so far, when it is not one range of `buf`.
    data: Vec<u8>,
    /// The event's single `data:` line, still in `buf` (`start..end`).
    in_buf: Option<(usize, usize)>,
    has_data: bool,
    event: Option<String>,
    limit: usize,
}

/// `data` keeps its capacity between events up to this size (a large event's buffer is
/// freed once it is dispatched: memory per open stream).
const KEPT_DATA_CAPACITY: usize = 64 * 1024;

impl Parser {
    pub fn new(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            pos: 0,
            data: Vec::new(),
            in_buf: None,
            has_data: false,
            event: None,
            limit,
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, chunk: &[u8]) {
        // A data line waiting in the consumed part of `buf` moves out before it is reused.
        self.gather_in_buf();
        if !self.let_go_if_parsed() && self.pos > 64 * 1024 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// Lets the buffer go once all of it is parsed and no data line waits in it, so a quiet
    /// stream holds none (memory per open stream); true if it did.
    fn let_go_if_parsed(&mut self) -> bool {
        let parsed = self.pos == self.buf.len() && self.in_buf.is_none();
        if parsed {
            self.buf = Vec::new();
            self.pos = 0;
        }
        parsed
    }

    fn gather_in_buf(&mut self) {
        if let Some((start, end)) = self.in_buf.take() {
            self.data.extend_from_slice(&self.buf[start..end]);
        }
    }

    /// The next complete event, if one is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, SseError> {
        self.next_with(|event, data| Frame {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        })
    }

    /// The next complete event decoded by `decode(event, data)` from where it lies.
    pub fn next_with<T>(
        &mut self,
        decode: impl FnOnce(Option<&str>, &str) -> T,
    ) -> Result<Option<T>, SseError> {
        loop {
            let rest = &self.buf[self.pos..];
            let Some(nl) = memchr::memchr(b'\n', rest) else {
                if rest.len() + self.data_len() > self.limit {
                    return Err(SseError::TooLarge { limit: self.limit });
                }
                self.let_go_if_parsed();
                return Ok(None);
            };
            let line_start = self.pos;
            let mut line_len = nl;
            if nl > 0 && rest[nl - 1] == b'\r' {
                line_len -= 1;
            }
            self.pos += nl + 1;
            if line_len == 0 {
                if !std::mem::take(&mut self.has_data) {
                    self.event = None;
                    continue;
                }
                return self.dispatch(decode).map(Some);
            }
            let line = &self.buf[line_start..line_start + line_len];
            if line[0] == b':' {
                continue;
            }
            let (field, value_at) = match memchr::memchr(b':', line) {
                Some(i) => {
                    let skip = usize::from(line.get(i + 1) == Some(&b' '));
                    (&line[..i], line_start + i + 1 + skip)
                }
                None => (line, line_start + line_len),
            };
            let value_end = line_start + line_len;
            match field {
                b"data" => {
                    let value_len = value_end - value_at;
                    if self.data_len() + value_len + 1 > self.limit {
                        return Err(SseError::TooLarge { limit: self.limit });
                    }
                    if self.has_data {
                        self.gather_in_buf();
                        self.data.push(b'\n');
                        self.data.extend_from_slice(&self.buf[value_at..value_end]);
                    } else {
                        self.in_buf = Some((value_at, value_end));
                    }
                    self.has_data = true;
                }
                b"event" => {
                    let value = &self.buf[value_at..value_end];
                    self.event = Some(String::from_utf8_lossy(value).into_owned());
                }
                _ => {}
            }
        }
    }

    fn data_len(&self) -> usize {
        self.data.len() + self.in_buf.map_or(0, |(start, end)| end - start)
    }

    fn dispatch<T>(&mut self, decode: impl FnOnce(Option<&str>, &str) -> T) -> Result<T, SseError> {
        let event = self.event.take();
        let bytes = match self.in_buf.take() {
            Some((start, end)) => &self.buf[start..end],
            None => &self.data[..],
        };
        let decoded = match std::str::from_utf8(bytes) {
            Ok(data) => Ok(decode(event.as_deref(), data)),
            Err(_) => Err(SseError::NotUtf8),
        };
        self.data.clear();
        if self.data.capacity() > KEPT_DATA_CAPACITY {
            self.data = Vec::new();
        }
        decoded
    }
}

/// The events of an SSE body, each decoded by `decode(event, data)` where it lies. A final
/// event without its blank line is dispatched at EOF.
pub fn frames<S, E, T, D>(
    body: S,
    limit: usize,
    decode: D,
) -> impl Stream<Item = Result<T, SseError>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display,
    T: Send,
    D: FnMut(Option<&str>, &str) -> T + Send + 'static,
{
    let state = (body, Parser::new(limit), false, decode);
    futures::stream::unfold(
        state,
        |(mut body, mut parser, mut ended, mut decode)| async move {
            loop {
                match parser.next_with(&mut decode) {
                    Ok(Some(item)) => return Some((Ok(item), (body, parser, ended, decode))),
                    Err(e) => return Some((Err(e), (body, parser, true, decode))),
                    Ok(None) if ended => return None,
                    Ok(None) => {}
                }
                match body.next().await {
                    Some(Ok(chunk)) => parser.push(&chunk),
                    Some(Err(e)) => {
                        let broke = SseError::Body(e.to_string());
                        return Some((Err(broke), (body, parser, true, decode)));
                    }
                    None => {
                        ended = true;
                        // Terminate a last line and event the server left open.
                        parser.push(b"\n\n");
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]], limit: usize) -> Vec<Result<Frame, SseError>> {
        let mut p = Parser::new(limit);
        let mut out = Vec::new();
        for c in chunks {
            p.push(c);
            loop {
                match p.next_frame() {
                    Ok(Some(f)) => out.push(Ok(f)),
                    Ok(None) => break,
                    Err(e) => {
                        out.push(Err(e));
                        return out;
                    }
                }
            }
        }
        out
    }

    fn data(frames: &[Result<Frame, SseError>]) -> Vec<&str> {
        frames
            .iter()
            .map(|f| f.as_ref().unwrap().data.as_str())
            .collect()
    }

    #[test]
    fn any_split_gives_the_same_frames() {
        // Data lines left in the read buffer, then moved out when the next chunk comes.
        let stream: &[u8] =
            b"data: one\r\ndata: two\r\n\r\n: c\n\ndata: {\"x\":3}\n\nevent: e\ndata:\n\n";
        let whole = parse_all(&[stream], 1024);
        assert_eq!(data(&whole), ["one\ntwo", r#"{"x":3}"#, ""]);
        for at in 0..stream.len() {
            let (a, b) = stream.split_at(at);
            assert_eq!(parse_all(&[a, b], 1024), whole, "split at {at}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(parse_all(&bytes, 1024), whole, "byte by byte");
    }

    #[test]
    fn crlf_lf_comments_and_split_chunks() {
        let frames = parse_all(
            &[
                b"data: {\"a\":1}\r\n\r\n: ping - 2026\r\n\r\nid: 7\nda",
                b"ta: x\n\nevent: error\r\ndata: e\r",
                b"\n\r\n",
            ],
            1024,
        );
        assert_eq!(data(&frames), [r#"{"a":1}"#, "x", "e"]);
        assert_eq!(frames[2].as_ref().unwrap().event.as_deref(), Some("error"));
        assert_eq!(frames[0].as_ref().unwrap().event, None);
    }

    #[test]
    fn multi_line_data_joins_with_newlines() {
        let frames = parse_all(&[b"data:a\ndata: b\n\n"], 1024);
        assert_eq!(data(&frames), ["a\nb"]);
    }

    #[test]
    fn oversized_events_fail_before_buffering_more() {
        let frames = parse_all(&[b"data: 0123456789", b"0123456789"], 12);
        assert_eq!(frames, [Err(SseError::TooLarge { limit: 12 })]);
    }

    #[test]
    fn recorded_fixtures_parse_in_both_framings() {
        for path in [
            "v1/stream-echo.sse",
            "v0_3/stream-echo.sse",
            "js_0_2/stream-echo.sse",
            "v1/subscribe-input-required-idle.sse",
        ] {
            let full = format!("{}/fixtures/a2a/{path}", env!("CARGO_MANIFEST_DIR"));
            let body = std::fs::read(full).unwrap();
            let frames = parse_all(&[&body], 1 << 20);
            assert!(!frames.is_empty(), "{path}");
            for f in &frames {
                let f = f.as_ref().unwrap();
                assert!(
                    f.data.starts_with('{') && !f.data.contains('\r'),
                    "{path}: {f:?}"
                );
            }
        }
    }
}
