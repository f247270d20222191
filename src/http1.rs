//! HTTP/1.1 message framing (RFC 9112), the one home of its rules for both sides of the
//! gateway: the upstream stream reader ([`crate::a2a::direct`]) and the inbound server
//! ([`crate::http::server`]). Pure: bytes in, payload bytes out, no I/O.
//!
//! One request boundary (docs/security.md, "HTTP/1.1 framing"): a head ends at the first
//! empty line as `httparse` reads it (CRLF or a bare LF), so no byte is ever skipped or read
//! twice; a head holding a bare LF or a bare CR is then refused by [`check_line_endings`] on
//! both sides, never read with a boundary another parser might draw elsewhere. Bodies are
//! `Content-Length` (one decimal value, no list) or chunked (RFC 9112 §7.1, strictly: CRLF
//! only, hex digits only, extensions and trailer fields checked against the grammar); any
//! other shape is a [`FramingError`]. Where hyper is more lenient (whitespace before a
//! chunk line's CRLF, control characters in extensions, bare LF inside trailers, lists in
//! `Content-Length`), this module refuses: a differential corpus against hyper's server
//! (tests/http1/) holds it there.
//!
//! Bounds against hostile peers: a head is at most [`MAX_HEAD_BYTES`] with at most
//! [`MAX_HEADERS`] headers; a chunk-size line at most [`MAX_CHUNK_LINE`] bytes, its size
//! overflow-checked; a body's chunk extensions at most [`MAX_EXTENSION_BYTES`] in all and its
//! trailers at most [`MAX_TRAILER_BYTES`] and [`MAX_HEADERS`] lines (hyper's own bounds), so
//! a decoder never leaves more than those undecoded.

use axum::http::header::{HeaderName, CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};

/// The most bytes of a message head (start line and headers).
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most headers a message head may have (and trailer lines a chunked body).
pub(crate) const MAX_HEADERS: usize = 100;
/// The most bytes of a chunk-size line (size and extensions, without its CRLF).
pub(crate) const MAX_CHUNK_LINE: usize = 1024;
/// The most bytes of all chunk extensions of one body (hyper's `CHUNKED_EXTENSIONS_LIMIT`).
pub(crate) const MAX_EXTENSION_BYTES: usize = 16 * 1024;
/// The most bytes of a chunked body's trailer section (hyper's `TRAILER_LIMIT`).
pub(crate) const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// A head longer than [`MAX_HEAD_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeadTooLarge;

/// Why a message's framing is refused (RFC 9112): a fixed text of ours, never the peer's
/// bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct FramingError(pub(crate) &'static str);

/// The length of the head at the start of `buf` once it is whole: up to and including the
/// first empty line, ended by CRLF or a bare LF as `httparse` ends it (the true length, so
/// a head with a bare LF is refused rather than read with another boundary). Searching
/// resumes from `searched` (the caller keeps it, so a head trickling in a byte at a time is
/// searched once). [`HeadTooLarge`] once the head, whole or not, is over [`MAX_HEAD_BYTES`].
pub(crate) fn find_head(buf: &[u8], searched: &mut usize) -> Result<Option<usize>, HeadTooLarge> {
    let from = *searched;
    let end = memchr::memchr_iter(b'\n', &buf[from..])
        .map(|at| from + at + 1)
        .find_map(|line_start| match &buf[line_start..] {
            [b'\n', ..] => Some(line_start + 1),
            [b'\r', b'\n', ..] => Some(line_start + 2),
            _ => None,
        });
    // The last two bytes may begin the empty line ("\n" or "\n\r"): searched again.
    *searched = buf.len().saturating_sub(2);
    match end {
        Some(len) if len <= MAX_HEAD_BYTES => Ok(Some(len)),
        None if buf.len() <= MAX_HEAD_BYTES => Ok(None),
        _ => Err(HeadTooLarge),
    }
}

/// Every line of `head` ends in CRLF: no bare LF, no bare CR (RFC 9112 §2.2 lets a server
/// accept a bare LF; the gateway does not, so it never draws a boundary a front proxy does
/// not).
pub(crate) fn check_line_endings(head: &[u8]) -> Result<(), FramingError> {
    let bare_lf = memchr::memchr_iter(b'\n', head).any(|at| at == 0 || head[at - 1] != b'\r');
    let bare_cr = memchr::memchr_iter(b'\r', head).any(|at| head.get(at + 1) != Some(&b'\n'));
    match (bare_lf, bare_cr) {
        (true, _) => Err(FramingError("a line ended by a bare LF")),
        (_, true) => Err(FramingError("a bare CR")),
        _ => Ok(()),
    }
}

/// `s` without leading and trailing OWS (SP, HTAB: RFC 9110 §5.6.3), no other whitespace.
fn trim_ows(s: &[u8]) -> &[u8] {
    let ows = |b: &u8| matches!(b, b' ' | b'\t');
    let start = s.iter().take_while(|b| ows(b)).count();
    let end = s.len() - s[start..].iter().rev().take_while(|b| ows(b)).count();
    &s[start..end]
}

/// True for a `tchar` (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The transfer codings a message's `Transfer-Encoding` values list, lower-cased
/// (RFC 9112 §6.1). Strict where RFC 9110 §5.6.1 is lenient, as hyper and llhttp are: an
/// empty member (`chunked,`) or one that is not a token (parameters, quotes) is refused.
pub(crate) fn transfer_codings<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<String>, FramingError> {
    let mut codings = Vec::new();
    for member in values.into_iter().flat_map(|v| v.split(|b| *b == b',')) {
        let member = trim_ows(member);
        if member.is_empty() || !member.iter().copied().all(is_tchar) {
            return Err(FramingError(
                "a Transfer-Encoding that is not a list of codings",
            ));
        }
        codings.push(String::from_utf8_lossy(member).to_ascii_lowercase());
    }
    Ok(codings)
}

/// The comma-separated tokens of a header's values, trimmed and lower-cased (RFC 9110
/// §5.6.1; `Connection`).
pub(crate) fn tokens<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Vec<String> {
    values
        .into_iter()
        .flat_map(|v| v.split(|b| *b == b','))
        .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// True if `codings` (from [`transfer_codings`]) end in chunked (RFC 9112 §6.3).
pub(crate) fn ends_in_chunked(codings: &[String]) -> bool {
    codings.last().is_some_and(|c| c == "chunked")
}

/// The length a message's `Content-Length` gives (RFC 9110 §8.6, RFC 9112 §6.3): exactly
/// one header holding one decimal number; `None` without any. A list (`5, 5`) or a second
/// header is refused, even when the values agree (llhttp refuses both, hyper the list).
pub(crate) fn content_length<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Option<u64>, FramingError> {
    let mut values = values.into_iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(FramingError("more than one Content-Length"));
    }
    let value = trim_ows(value);
    let digits = !value.is_empty() && value.len() <= 19 && value.iter().all(u8::is_ascii_digit);
    digits
        .then(|| std::str::from_utf8(value).ok()?.parse::<u64>().ok())
        .flatten()
        .map(Some)
        .ok_or(FramingError("a Content-Length that is not one number"))
}

/// The headers that frame a message, written by the transport itself: a request's
/// headers never set them (the upstream reader, `crate::a2a::direct`, writes its own), and
/// no configured header may carry anything in them.
pub(crate) const FRAMING_HEADERS: [HeaderName; 4] =
    [HOST, CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION];

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
    Chunked(Chunked),
    Length(u64),
    Close,
}

/// A chunked body being decoded: where it is, and what its extensions and trailers have
/// taken so far (each bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunked {
    at: Chunk,
    extension_bytes: usize,
    trailer_bytes: usize,
    trailer_lines: usize,
}

/// Where a chunked body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk, this many bytes to go.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last chunk: trailer field lines until an empty one.
    Trailers,
    /// The body ended.
    Done,
}

impl Framing {
    /// A chunked body, from its start.
    pub(crate) fn chunked() -> Self {
        Framing::Chunked(Chunked {
            at: Chunk::Size,
            extension_bytes: 0,
            trailer_bytes: 0,
            trailer_lines: 0,
        })
    }

    /// True once the body has ended (a length or a chunked body; a close-delimited body
    /// ends with its connection).
    pub(crate) fn ended(&self) -> bool {
        match self {
            Framing::Length(left) => *left == 0,
            Framing::Chunked(chunked) => chunked.at == Chunk::Done,
            Framing::Close => false,
        }
    }

    /// The bytes of trailer fields read so far (they count towards a body's limit).
    pub(crate) fn trailer_bytes(&self) -> usize {
        match self {
            Framing::Chunked(chunked) => chunked.trailer_bytes,
            _ => 0,
        }
    }
}

/// Decodes what `input` holds of the body into `out`; returns how many input bytes were
/// used. Stops where more input is needed. On an error, `out` holds the payload decoded
/// before it.
pub(crate) fn decode(
    framing: &mut Framing,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<usize, FramingError> {
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
        Framing::Chunked(chunked) => chunked.decode(input, out),
    }
}

/// The line at the start of `rest` without its CRLF and the bytes it takes with it, or
/// `None` while it is not whole (and at most `max` bytes long). A line ended by a bare LF
/// is refused.
fn crlf_line<'a>(
    rest: &'a [u8],
    max: usize,
    too_long: &'static str,
) -> Result<Option<(&'a [u8], usize)>, FramingError> {
    let Some(nl) = memchr::memchr(b'\n', &rest[..rest.len().min(max + 2)]) else {
        return if rest.len() > max + 1 {
            Err(FramingError(too_long))
        } else {
            Ok(None)
        };
    };
    match rest[..nl].strip_suffix(b"\r") {
        Some(line) => Ok(Some((line, nl + 1))),
        None => Err(FramingError("a chunked body line ended by a bare LF")),
    }
}

impl Chunked {
    fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, FramingError> {
        let mut at = 0;
        loop {
            let rest = &input[at..];
            match self.at {
                Chunk::Size => {
                    let Some((line, used)) =
                        crlf_line(rest, MAX_CHUNK_LINE, "a chunk-size line too long")?
                    else {
                        return Ok(at);
                    };
                    let (size, extensions) = chunk_line(line)?;
                    self.extension_bytes += extensions;
                    if self.extension_bytes > MAX_EXTENSION_BYTES {
                        return Err(FramingError("chunk extensions over their bound"));
                    }
                    at += used;
                    self.at = if size == 0 {
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
                    self.at = if left == 0 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left)
                    };
                }
                Chunk::DataEnd => {
                    match rest {
                        [] | [b'\r'] => return Ok(at),
                        [b'\r', b'\n', ..] => at += 2,
                        _ => return Err(FramingError("a chunk's data not followed by CRLF")),
                    }
                    self.at = Chunk::Size;
                }
                Chunk::Trailers => {
                    let room = MAX_TRAILER_BYTES - self.trailer_bytes;
                    let Some((line, used)) = crlf_line(rest, room, "trailers over their bound")?
                    else {
                        return Ok(at);
                    };
                    at += used;
                    if line.is_empty() {
                        self.at = Chunk::Done;
                        return Ok(at);
                    }
                    check_field_line(line)?;
                    self.trailer_bytes += used;
                    self.trailer_lines += 1;
                    if self.trailer_bytes > MAX_TRAILER_BYTES || self.trailer_lines > MAX_HEADERS {
                        return Err(FramingError("trailers over their bound"));
                    }
                }
                Chunk::Done => return Ok(at),
            }
        }
    }
}

/// A chunk-size line without its CRLF (RFC 9112 §7.1): `1*HEXDIG [ chunk-ext ]`. The size,
/// overflow-checked, and the extensions' length.
fn chunk_line(line: &[u8]) -> Result<(u64, usize), FramingError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(FramingError("a chunk size that is not hex digits"));
    }
    let size = line[..digits].iter().try_fold(0u64, |size, b| {
        let digit = (*b as char).to_digit(16).unwrap_or_default();
        size.checked_mul(16)?.checked_add(u64::from(digit))
    });
    let size = size.ok_or(FramingError("a chunk size that overflows"))?;
    let extensions = &line[digits..];
    check_extensions(extensions)?;
    Ok((size, extensions.len()))
}

/// `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`, with
/// `chunk-ext-name = token` and `chunk-ext-val = token / quoted-string` (RFC 9112 §7.1.1).
fn check_extensions(mut ext: &[u8]) -> Result<(), FramingError> {
    const BAD: FramingError = FramingError("a chunk extension that does not parse");
    let skip_ws =
        |s: &[u8]| -> usize { s.iter().take_while(|b| matches!(b, b' ' | b'\t')).count() };
    let token = |s: &[u8]| -> usize { s.iter().take_while(|b| is_tchar(**b)).count() };
    loop {
        if ext.is_empty() {
            return Ok(());
        }
        // BWS only before ";" (or "="): "5 " and "5;a " are refused, as the grammar says.
        ext = &ext[skip_ws(ext)..];
        let rest = ext.strip_prefix(b";").ok_or(BAD)?;
        ext = &rest[skip_ws(rest)..];
        let name = token(ext);
        if name == 0 {
            return Err(BAD);
        }
        ext = &ext[name..];
        let after = &ext[skip_ws(ext)..];
        let Some(value) = after.strip_prefix(b"=") else {
            continue;
        };
        ext = &value[skip_ws(value)..];
        ext = match ext.first() {
            Some(b'"') => &ext[quoted_string(ext).ok_or(BAD)?..],
            _ => match token(ext) {
                0 => return Err(BAD),
                n => &ext[n..],
            },
        };
    }
}

/// The length of the quoted-string at the start of `s` (RFC 9110 §5.6.4), if it is one.
fn quoted_string(s: &[u8]) -> Option<usize> {
    let text = |b: u8| matches!(b, b'\t' | b' ' | 0x21..=0x7e | 0x80..=0xff);
    let mut at = 1;
    loop {
        match *s.get(at)? {
            b'"' => return Some(at + 1),
            b'\\' if s.get(at + 1).is_some_and(|b| text(*b)) => at += 2,
            b'\\' => return None,
            b if text(b) => at += 1,
            _ => return None,
        }
    }
}

/// A trailer field line (RFC 9112 §5): `field-name ":" OWS field-value OWS`, a token for a
/// name, no control characters but HTAB in the value, no obs-fold.
fn check_field_line(line: &[u8]) -> Result<(), FramingError> {
    let name = line.iter().take_while(|b| is_tchar(**b)).count();
    let value_ok = |b: &u8| matches!(b, b'\t' | b' ' | 0x21..=0x7e | 0x80..=0xff);
    match line.get(name) {
        Some(b':') if name > 0 && line[name + 1..].iter().all(value_ok) => Ok(()),
        _ => Err(FramingError("a trailer that is not a header field")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload of a chunked `body` fed in pieces of `step` bytes, and whether it ended.
    pub(crate) fn dechunk(body: &[u8], step: usize) -> Result<(Vec<u8>, bool), FramingError> {
        let mut framing = Framing::chunked();
        let mut pending = Vec::new();
        let mut payload = Vec::new();
        for piece in body.chunks(step.max(1)) {
            pending.extend_from_slice(piece);
            let used = decode(&mut framing, &pending, &mut payload)?;
            pending.drain(..used);
        }
        Ok((payload, framing.ended()))
    }

    #[test]
    fn chunked_bodies_decode_however_they_are_split() {
        let body = b"6\r\ndata: \r\n5;ext=1;q=\"a \\\" b\" ; flag\r\nhello\r\n2\r\n\n\n\r\n0\r\nx-trailer: 1\r\nother:\tv v\r\n\r\n";
        for step in 1..body.len() {
            let (payload, ended) = dechunk(body, step).unwrap();
            assert_eq!(payload, b"data: hello\n\n", "step {step}");
            assert!(ended, "step {step}");
        }
    }

    /// RFC 9112 §7.1 strictly: each of these is refused whole and byte by byte (the shapes
    /// of the desync audit, issue 18).
    #[test]
    fn chunked_framing_outside_the_grammar_is_refused() {
        let long_ext = [
            &b"1;x="[..],
            &vec![b'a'; MAX_CHUNK_LINE],
            b"\r\na\r\n0\r\n\r\n",
        ]
        .concat();
        let cases: Vec<&[u8]> = vec![
            b"zz\r\nab\r\n",
            b"FFFFFFFFFFFFFFFFF\r\n",
            b"3\r\nabcX",
            b"\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"5\r\nhello\n0\r\n\r\n",
            b"+5\r\nhello\r\n0\r\n\r\n",
            b" 5\r\nhello\r\n0\r\n\r\n",
            b"5 \r\nhello\r\n0\r\n\r\n",
            b"\x0b5\r\nhello\r\n0\r\n\r\n",
            b"5\x0c\r\nhello\r\n0\r\n\r\n",
            b"5\xc2\xa0\r\nhello\r\n0\r\n\r\n",
            b"5\xe3\x80\x80\r\nhello\r\n0\r\n\r\n",
            b"5\r\r\nhello\r\n0\r\n\r\n",
            b"0x5\r\nhello\r\n0\r\n\r\n",
            b"5;a\nhello\r\n0\r\n\r\n",
            b"2;\nxx\r\n0\r\n\r\n",
            b"2;x\rxx\r\n0\r\n\r\n",
            b"5;\x01\r\nhello\r\n0\r\n\r\n",
            b"5;a=\"open\r\nhello\r\n0\r\n\r\n",
            b"5;=b\r\nhello\r\n0\r\n\r\n",
            b"5;a=\r\nhello\r\n0\r\n\r\n",
            b"0\r\nX: 1\n\n",
            b"0\r\nno colon\r\n\r\n",
            b"0\r\n folded: x\r\n\r\n",
            b"0\r\nX: a\x00b\r\n\r\n",
            b"0\r\n\n",
            &long_ext,
        ];
        for bad in cases {
            for step in [bad.len(), 1] {
                assert!(
                    dechunk(bad, step).is_err(),
                    "{:?} step {step}",
                    String::from_utf8_lossy(bad)
                );
            }
        }
    }

    #[test]
    fn trailers_and_extensions_are_bounded() {
        let line = format!("x-t: {}\r\n", "a".repeat(1000));
        let trailers = line.repeat(MAX_TRAILER_BYTES / line.len() + 1);
        let body = format!("0\r\n{trailers}\r\n");
        assert_eq!(
            dechunk(body.as_bytes(), 4096).unwrap_err(),
            FramingError("trailers over their bound")
        );
        let many = format!("0\r\n{}\r\n", "a: b\r\n".repeat(MAX_HEADERS + 1));
        assert!(dechunk(many.as_bytes(), 7).is_err());
        // A trailer line that never ends is refused once over the bound, not buffered.
        let endless = [&b"0\r\nx: "[..], &vec![b'a'; MAX_TRAILER_BYTES + 8]].concat();
        assert!(dechunk(&endless, endless.len()).is_err());
        let ext = format!("1;{}\r\na\r\n", "e".repeat(1000));
        let body = format!("{}0\r\n\r\n", ext.repeat(MAX_EXTENSION_BYTES / 1000 + 1));
        assert_eq!(
            dechunk(body.as_bytes(), 512).unwrap_err(),
            FramingError("chunk extensions over their bound")
        );
        let mut framing = Framing::chunked();
        decode(&mut framing, b"0\r\nab: c\r\n\r\n", &mut Vec::new()).unwrap();
        assert_eq!((framing.ended(), framing.trailer_bytes()), (true, 7));
    }

    #[test]
    fn what_came_before_a_framing_error_is_decoded() {
        let mut out = Vec::new();
        let mut framing = Framing::chunked();
        assert!(decode(&mut framing, b"3\r\nabc\r\n2\nxy", &mut out).is_err());
        assert_eq!(out, b"abc");
    }

    #[test]
    fn a_length_ends_the_body_and_close_takes_all() {
        let mut framing = Framing::Length(4);
        let mut out = Vec::new();
        assert_eq!(decode(&mut framing, b"abcdef", &mut out).unwrap(), 4);
        assert_eq!((out.as_slice(), framing.ended()), (&b"abcd"[..], true));
        let mut out = Vec::new();
        assert_eq!(decode(&mut Framing::Close, b"xyz", &mut out).unwrap(), 3);
        assert_eq!(out, b"xyz");
    }

    #[test]
    fn a_head_ends_where_httparse_ends_it() {
        let mut searched = 0;
        assert_eq!(
            find_head(b"GET / HTTP/1.1\r\nx: y\r", &mut searched),
            Ok(None)
        );
        let head = b"GET / HTTP/1.1\r\nx: y\r\n\r\nbody";
        assert_eq!(find_head(head, &mut searched), Ok(Some(head.len() - 4)));
        // Bare LF endings: the true length (then refused by check_line_endings).
        for (head, len) in [
            (&b"GET / HTTP/1.1\r\nHost: x\n\nGET /b"[..], 25),
            (b"GET / HTTP/1.1\nHost: x\r\n\nrest", 25),
            (b"GET / HTTP/1.1\r\nHost: x\n\r\nrest", 26),
        ] {
            assert_eq!(find_head(head, &mut 0), Ok(Some(len)), "{head:?}");
            let mut parsed = [httparse::EMPTY_HEADER; 4];
            let status = httparse::Request::new(&mut parsed).parse(head).unwrap();
            assert_eq!(status, httparse::Status::Complete(len), "{head:?}");
            assert!(check_line_endings(&head[..len]).is_err());
        }
        // Trickled a byte at a time, the same end.
        let head = b"GET / HTTP/1.1\r\nHost: x\n\r\nrest";
        let mut searched = 0;
        let found = (1..=head.len()).find_map(|n| find_head(&head[..n], &mut searched).unwrap());
        assert_eq!(found, Some(26));
        assert_eq!(
            check_line_endings(b"GET / HTTP/1.1\r\nx: a\rb\r\n\r\n"),
            Err(FramingError("a bare CR"))
        );
        assert_eq!(
            check_line_endings(b"GET / HTTP/1.1\r\nx: y\r\n\r\n"),
            Ok(())
        );
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
    fn content_length_is_one_number_and_codings_a_strict_list() {
        assert_eq!(content_length([&b"5"[..]]), Ok(Some(5)));
        assert_eq!(content_length(std::iter::empty()), Ok(None));
        assert!(content_length([&b"5"[..], b"5"]).is_err());
        for bad in [
            &b"+5"[..],
            b"5, 5",
            b"5,5",
            b"5, 6",
            b"",
            b"0x5",
            b"99999999999999999999",
        ] {
            assert!(content_length([bad]).is_err(), "{bad:?}");
        }
        let codings = |v: &[u8]| transfer_codings([v]);
        assert!(ends_in_chunked(&codings(b"gzip, Chunked ").unwrap()));
        assert!(!ends_in_chunked(&codings(b"chunked, gzip").unwrap()));
        for bad in [
            &b"chunked,"[..],
            b", chunked",
            b"\"chunked\"",
            b"chunked;q=1",
            b"x chunked",
            b"chunked\x0b",
        ] {
            assert!(codings(bad).is_err(), "{bad:?}");
        }
    }
}
