//! A small SSE reader for upstream A2A streams (WHATWG HTML §9.2.6, the parts A2A uses).
//!
//! Lines end in LF or CRLF (sse-starlette, used by a2a-sdk, sends CRLF; Express sends LF);
//! `:` comment lines (`: ping - <time>` keep-alives) are skipped; `data:` lines of one event
//! are joined with `\n`; `event:` is kept (A2A 1.0 marks errors with `event: error`); other
//! fields (`id:`, `retry:`) are ignored. Memory is bounded: an event, or an unterminated line,
//! longer than `limit` bytes is an error before it is buffered further.

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
/// [`Parser::next_frame`].
#[derive(Debug)]
pub struct Parser {
    buf: Vec<u8>,
    /// Start of the unparsed part of `buf`.
    pos: usize,
    data: Vec<u8>,
    has_data: bool,
    event: Option<String>,
    limit: usize,
}

impl Parser {
    /// A parser that refuses events over `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            pos: 0,
            data: Vec::new(),
            has_data: false,
            event: None,
            limit,
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 64 * 1024 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event, if the buffer holds one.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, SseError> {
        loop {
            let rest = &self.buf[self.pos..];
            let Some(nl) = memchr::memchr(b'\n', rest) else {
                if rest.len() + self.data.len() > self.limit {
                    return Err(SseError::TooLarge { limit: self.limit });
                }
                return Ok(None);
            };
            let mut line = &rest[..nl];
            if let [head @ .., b'\r'] = line {
                line = head;
            }
            self.pos += nl + 1;
            if line.is_empty() {
                if let Some(frame) = self.dispatch()? {
                    return Ok(Some(frame));
                }
                continue;
            }
            if line[0] == b':' {
                continue;
            }
            let (field, value) = match memchr::memchr(b':', line) {
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (line, &b""[..]),
            };
            match field {
                b"data" => {
                    if self.data.len() + value.len() + 1 > self.limit {
                        return Err(SseError::TooLarge { limit: self.limit });
                    }
                    if self.has_data {
                        self.data.push(b'\n');
                    }
                    self.data.extend_from_slice(value);
                    self.has_data = true;
                }
                b"event" => {
                    self.event = Some(String::from_utf8_lossy(value).into_owned());
                }
                _ => {}
            }
        }
    }

    fn dispatch(&mut self) -> Result<Option<Frame>, SseError> {
        let event = self.event.take();
        if !std::mem::take(&mut self.has_data) {
            return Ok(None);
        }
        let data =
            String::from_utf8(std::mem::take(&mut self.data)).map_err(|_| SseError::NotUtf8)?;
        Ok(Some(Frame { event, data }))
    }
}

/// The events of an SSE body. A final event without its blank line is dispatched at EOF.
pub fn frames<S, E>(body: S, limit: usize) -> impl Stream<Item = Result<Frame, SseError>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display,
{
    let state = (body, Parser::new(limit), false);
    futures::stream::unfold(state, |(mut body, mut parser, mut ended)| async move {
        loop {
            match parser.next_frame() {
                Ok(Some(frame)) => return Some((Ok(frame), (body, parser, ended))),
                Err(e) => return Some((Err(e), (body, parser, true))),
                Ok(None) if ended => return None,
                Ok(None) => {}
            }
            match body.next().await {
                Some(Ok(chunk)) => parser.push(&chunk),
                Some(Err(e)) => {
                    return Some((Err(SseError::Body(e.to_string())), (body, parser, true)))
                }
                None => {
                    ended = true;
                    // Terminate a last line and event the server left open.
                    parser.push(b"\n\n");
                }
            }
        }
    })
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
