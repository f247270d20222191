//! HTTP/1.1 message framing (RFC 9112), the one home of its rules for both sides of the
//! gateway: the upstream stream reader ([`crate::a2a::direct`]) and the inbound server
//! ([`crate::http::server`]). Pure: bytes in, payload bytes out, no I/O.
//!
//! Bounds against hostile peers: a head is at most [`MAX_HEAD_BYTES`] with at most
//! [`MAX_HEADERS`] headers; a chunk-size line at most [`MAX_CHUNK_LINE`] bytes, its size parsed
//! with overflow checks (at most 16 hex digits); trailers are read and dropped, at most
//! [`MAX_HEAD_BYTES`] (the callers bound what they buffer by it).

/// The most bytes of a message head (start line and headers), and of a chunked body's
/// trailers.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most headers a message head may have.
pub(crate) const MAX_HEADERS: usize = 100;
/// The most bytes of a chunk-size line (size and extensions).
const MAX_CHUNK_LINE: usize = 1024;

/// A head longer than [`MAX_HEAD_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeadTooLarge;

/// The length of the head at the start of `buf` once it is whole, searching from `searched`
/// (the caller keeps it, so a head trickling in a byte at a time is searched once).
/// [`HeadTooLarge`] once the head, whole or not, is over [`MAX_HEAD_BYTES`].
pub(crate) fn find_head(buf: &[u8], searched: &mut usize) -> Result<Option<usize>, HeadTooLarge> {
    let end = memchr::memmem::find(&buf[*searched..], b"\r\n\r\n").map(|end| *searched + end + 4);
    *searched = buf.len().saturating_sub(3);
    match end {
        Some(len) if len <= MAX_HEAD_BYTES => Ok(Some(len)),
        None if buf.len() <= MAX_HEAD_BYTES => Ok(None),
        _ => Err(HeadTooLarge),
    }
}

/// The comma-separated tokens of a header's values, trimmed and lower-cased (RFC 9110
/// §5.6.1; `Connection`, `Transfer-Encoding`).
pub(crate) fn tokens<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Vec<String> {
    values
        .into_iter()
        .flat_map(|v| v.split(|b| *b == b','))
        .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// True if `codings` (a `Transfer-Encoding`'s [`tokens`]) end in chunked (RFC 9112 §6.3).
pub(crate) fn ends_in_chunked(codings: &[String]) -> bool {
    codings.last().is_some_and(|c| c == "chunked")
}

/// The length a message's `Content-Length` values give (RFC 9110 §8.6, RFC 9112 §6.3):
/// every value and list member the same decimal number; `None` without any.
pub(crate) fn content_length<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Option<u64>, &'static str> {
    let mut length: Option<u64> = None;
    for member in values.into_iter().flat_map(|v| v.split(|b| *b == b',')) {
        let member = member.trim_ascii();
        let digits =
            !member.is_empty() && member.len() <= 19 && member.iter().all(u8::is_ascii_digit);
        let parsed = digits
            .then(|| std::str::from_utf8(member).ok()?.parse::<u64>().ok())
            .flatten()
            .ok_or("a Content-Length that is not a number")?;
        if length.is_some_and(|l| l != parsed) {
            return Err("Content-Length values that differ");
        }
        length = Some(parsed);
    }
    Ok(length)
}

/// Appends the header line `name: value`.
pub(crate) fn push_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Drops the first `used` bytes of a receive buffer; an emptied buffer goes back to the
/// allocator (a quiet connection holds none: memory per open stream).
pub(crate) fn consume(buf: &mut Vec<u8>, used: usize) {
    if used == buf.len() {
        *buf = Vec::new();
    } else {
        buf.drain(..used);
    }
}

/// How the body ends (RFC 9112 §6.3).
#[derive(Debug)]
pub(crate) enum Framing {
    Chunked(Chunk),
    Length(u64),
    Close,
}

/// Where a chunked body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk, this many bytes to go.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
    /// The body ended.
    Done,
}

/// Decodes what `input` holds of the body into `out`; returns how many input bytes were
/// used. Stops where more input is needed.
pub(crate) fn decode(
    framing: &mut Framing,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<usize, String> {
    match framing {
        Framing::Close => {
            out.extend_from_slice(input);
            Ok(input.len())
        }
        Framing::Length(left) => {
            let take = input
                .len()
                .min(usize::try_from(*left).unwrap_or(usize::MAX));
            out.extend_from_slice(&input[..take]);
            *left -= take as u64;
            Ok(take)
        }
        Framing::Chunked(state) => decode_chunked(state, input, out),
    }
}

fn decode_chunked(state: &mut Chunk, input: &[u8], out: &mut Vec<u8>) -> Result<usize, String> {
    let mut at = 0;
    loop {
        let rest = &input[at..];
        match *state {
            Chunk::Size => {
                let Some(nl) = memchr::memchr(b'\n', rest) else {
                    if rest.len() > MAX_CHUNK_LINE {
                        return Err("a chunk-size line too long".into());
                    }
                    return Ok(at);
                };
                if nl > MAX_CHUNK_LINE {
                    return Err("a chunk-size line too long".into());
                }
                let line = rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]);
                let size = line.split(|b| *b == b';').next().unwrap_or_default();
                let size = std::str::from_utf8(size)
                    .ok()
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && s.len() <= 16)
                    .and_then(|s| u64::from_str_radix(s, 16).ok())
                    .ok_or("a malformed chunk size")?;
                at += nl + 1;
                *state = if size == 0 {
                    Chunk::Trailers
                } else {
                    Chunk::Data(size)
                };
            }
            Chunk::Data(left) => {
                if rest.is_empty() {
                    return Ok(at);
                }
                let take = rest.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                out.extend_from_slice(&rest[..take]);
                at += take;
                let left = left - take as u64;
                *state = if left == 0 {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(left)
                };
            }
            Chunk::DataEnd => {
                at += match rest {
                    [] | [b'\r'] => return Ok(at),
                    [b'\r', b'\n', ..] => 2,
                    [b'\n', ..] => 1,
                    _ => return Err("a chunk not followed by CRLF".into()),
                };
                *state = Chunk::Size;
            }
            Chunk::Done => return Ok(at),
            Chunk::Trailers => {
                // Trailer lines are read and dropped; the empty line ends the body.
                let Some(nl) = memchr::memchr(b'\n', rest) else {
                    return Ok(at);
                };
                let line = rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]);
                at += nl + 1;
                if line.is_empty() {
                    *state = Chunk::Done;
                    return Ok(at);
                }
            }
        }
    }
}

impl Framing {
    /// True once the body has ended (a length or a chunked body; a close-delimited body
    /// ends with its connection).
    pub(crate) fn ended(&self) -> bool {
        matches!(self, Framing::Length(0) | Framing::Chunked(Chunk::Done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload of a chunked `body` fed in pieces of `step` bytes.
    fn dechunk(body: &[u8], step: usize) -> Result<(Vec<u8>, bool), String> {
        let mut framing = Framing::Chunked(Chunk::Size);
        let mut pending = Vec::new();
        let mut payload = Vec::new();
        let mut ended = false;
        for piece in body.chunks(step) {
            pending.extend_from_slice(piece);
            let mut out = Vec::new();
            let used = decode(&mut framing, &pending, &mut out)?;
            pending.drain(..used);
            ended = matches!(framing, Framing::Chunked(Chunk::Done));
            payload.extend_from_slice(&out);
        }
        Ok((payload, ended))
    }

    #[test]
    fn chunked_bodies_decode_however_they_are_split() {
        let body = b"6\r\ndata: \r\n5;ext=1\r\nhello\r\n2\r\n\n\n\r\n0\r\nx-trailer: 1\r\n\r\n";
        for step in 1..body.len() {
            let (payload, ended) = dechunk(body, step).unwrap();
            assert_eq!(payload, b"data: hello\n\n", "step {step}");
            assert!(ended, "step {step}");
        }
    }

    #[test]
    fn hostile_chunk_framing_is_refused() {
        for bad in [
            &b"zz\r\nab\r\n"[..],
            b"FFFFFFFFFFFFFFFFF\r\n",
            b"3\r\nabcX",
            b"\r\n",
        ] {
            assert!(dechunk(bad, bad.len()).is_err(), "{bad:?}");
        }
        let long = vec![b'1'; MAX_CHUNK_LINE + 2];
        assert!(dechunk(&long, long.len()).is_err());
    }

    #[test]
    fn a_length_ends_the_body_and_close_takes_all() {
        let mut framing = Framing::Length(4);
        let mut out = Vec::new();
        assert_eq!(decode(&mut framing, b"abcdef", &mut out).unwrap(), 4);
        assert_eq!(
            (out.as_slice(), matches!(framing, Framing::Length(0))),
            (&b"abcd"[..], true)
        );
        let mut out = Vec::new();
        assert_eq!(decode(&mut Framing::Close, b"xyz", &mut out).unwrap(), 3);
        assert_eq!(out, b"xyz");
    }

    #[test]
    fn a_head_is_found_once_whole_and_refused_once_too_large() {
        let mut searched = 0;
        assert_eq!(
            find_head(b"GET / HTTP/1.1\r\nx: y\r", &mut searched),
            Ok(None)
        );
        let head = b"GET / HTTP/1.1\r\nx: y\r\n\r\nbody";
        assert_eq!(find_head(head, &mut searched), Ok(Some(head.len() - 4)));
        // Over the bound whether or not its end has come (one read can bring it whole).
        let long = [
            &b"GET / HTTP/1.1\r\nx: "[..],
            &vec![b'a'; MAX_HEAD_BYTES],
            b"\r\n\r\n",
        ]
        .concat();
        assert_eq!(find_head(&long, &mut 0), Err(HeadTooLarge));
        assert_eq!(
            find_head(&long[..long.len() - 4], &mut 0),
            Err(HeadTooLarge)
        );
    }

    #[test]
    fn content_lengths_must_agree_and_be_digits() {
        assert_eq!(content_length([&b"5"[..], b"5, 5"]), Ok(Some(5)));
        assert_eq!(content_length(std::iter::empty()), Ok(None));
        for bad in [&b"+5"[..], b"5, 6", b"", b"0x5", b"99999999999999999999"] {
            assert!(content_length([bad]).is_err(), "{bad:?}");
        }
        assert!(ends_in_chunked(&tokens([&b"gzip, Chunked "[..]])));
        assert!(!ends_in_chunked(&tokens([&b"chunked, gzip"[..]])));
    }
}
