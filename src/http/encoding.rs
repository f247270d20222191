//! The encoding of a run stream (docs/mapping.md#encodings), chosen once per request from
//! its `Accept`: SSE (`text/event-stream`, AG-UI events as JSON) by default, AG-UI's
//! HTTP+Protobuf ([`crate::agui::proto`]) when an AG-UI 1.0 client lists its media type
//! explicitly. The schema is `@ag-ui/proto` 1.0.0's: a 0.0.x client's lacks arms the
//! gateway writes (`TOOL_CALL_RESULT`, activities), so it gets SSE, which it reads too.
//!
//! A wildcard (`*/*`, what curl sends) keeps SSE although the AG-UI spec would let it
//! choose protobuf: a person reading a stream in a terminal expects text. Errors before the
//! stream are JSON either way; after the `200` every event, a `RUN_ERROR` too, is framed in
//! the stream's encoding.

use axum::http::{header, HeaderMap};

use crate::agui::{proto, Event};

/// How a run's events are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// `data: <compact JSON>\n\n` per event (LF only: CRLF breaks `@ag-ui/client`,
    /// agui.md §5.2; compact JSON has no raw newlines).
    Sse,
    /// A 4-byte big-endian length and an `@ag-ui/proto` message per event.
    Protobuf,
}

const SSE_MEDIA_TYPE: &str = "text/event-stream";
/// A comment line: SSE parsers, `@ag-ui/client`'s included, ignore it.
const SSE_KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

impl Encoding {
    /// The encoding of a run requested with `headers` by a client that speaks AG-UI 1.0
    /// (`v1_client`, `RunAgentInput::is_v1_client`) or not. Protobuf when the client speaks
    /// 1.0 and a range of `Accept` names [`proto::MEDIA_TYPE`] itself with a `q` above 0 and
    /// at least that of the range that would choose SSE (`text/event-stream`, else
    /// `text/*`, else `*/*`); SSE otherwise, with no `Accept`, or one that lists neither. A
    /// `q` that is not a number between 0 and 1 makes its range count for nothing.
    pub(crate) fn negotiate(headers: &HeaderMap, v1_client: bool) -> Self {
        if !v1_client {
            return Self::Sse;
        }
        let mut protobuf: Option<f32> = None;
        // The SSE range's q and how specific it is (2: exact, 1: `text/*`, 0: `*/*`).
        let mut sse: Option<(u8, f32)> = None;
        let ranges = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','));
        for range in ranges {
            let mut params = range.split(';');
            let media = params.next().unwrap_or_default().trim();
            let q = params
                .filter_map(|p| p.split_once('='))
                .find(|(key, _)| key.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, q)| q.trim().parse::<f32>().ok())
                .filter(|q| (0.0..=1.0).contains(q))
                .unwrap_or(0.0);
            if media.eq_ignore_ascii_case(proto::MEDIA_TYPE) {
                protobuf = Some(protobuf.map_or(q, |p| p.max(q)));
                continue;
            }
            let specificity = if media.eq_ignore_ascii_case(SSE_MEDIA_TYPE) {
                2
            } else if media.eq_ignore_ascii_case("text/*") {
                1
            } else if media == "*/*" {
                0
            } else {
                continue;
            };
            if sse.is_none_or(|(s, _)| specificity > s) {
                sse = Some((specificity, q));
            }
        }
        match (protobuf, sse) {
            (Some(p), Some((_, s))) if p > 0.0 && p >= s => Self::Protobuf,
            (Some(p), None) if p > 0.0 => Self::Protobuf,
            _ => Self::Sse,
        }
    }

    /// The response's `Content-Type`.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Self::Sse => SSE_MEDIA_TYPE,
            Self::Protobuf => proto::MEDIA_TYPE,
        }
    }

    /// Appends one frame for `event` to `out`.
    pub(crate) fn write(self, event: Event, out: &mut Vec<u8>) {
        match self {
            Self::Sse => {
                out.extend_from_slice(b"data: ");
                crate::agui::event::encode_into(&event, out);
                out.extend_from_slice(b"\n\n");
            }
            Self::Protobuf => proto::encode_frame(event, out),
        }
    }

    /// What a quiet stream writes to show it is alive. Protobuf has nothing: an empty frame
    /// is an invalid event to `@ag-ui/proto`'s decoder, and any event would reach the app.
    pub(crate) fn keep_alive(self) -> Option<&'static [u8]> {
        match self {
            Self::Sse => Some(SSE_KEEP_ALIVE),
            Self::Protobuf => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn negotiate(accept: &[&str]) -> Encoding {
        let mut headers = HeaderMap::new();
        for a in accept {
            headers.append(header::ACCEPT, HeaderValue::from_str(a).unwrap());
        }
        Encoding::negotiate(&headers, true)
    }

    #[test]
    fn sse_unless_protobuf_is_asked_for_by_name() {
        use Encoding::{Protobuf, Sse};
        let proto = proto::MEDIA_TYPE;
        let cases: &[(&[&str], Encoding)] = &[
            (&[], Sse),
            (&["*/*"], Sse),
            (&["text/event-stream"], Sse),
            (&["application/json"], Sse),
            (&["application/*"], Sse),
            (&[proto], Protobuf),
            (&["APPLICATION/VND.AG-UI.EVENT+PROTO"], Protobuf),
            (&[&format!("text/event-stream, {proto}")], Protobuf),
            (&[&format!("{proto}, */*")], Protobuf),
            (&["text/event-stream", proto], Protobuf),
            (&[&format!("{proto};q=0.5, text/event-stream")], Sse),
            (
                &[&format!("{proto};q=0.5, text/event-stream;q=0.4")],
                Protobuf,
            ),
            (&[&format!("{proto};q=0.5, */*")], Sse),
            (
                &[&format!("{proto};q=0.5, text/event-stream;q=0.1, */*")],
                Protobuf,
            ),
            (&[&format!("{proto};q=0.5, text/*;q=0.9, */*;q=0.1")], Sse),
            (&[&format!("{proto} ; Q=0.2")], Protobuf),
            (&[&format!("{proto};q=0")], Sse),
            (&[&format!("{proto};q=0, */*;q=0")], Sse),
            (&[&format!("{proto};q=abc")], Sse),
            (&[&format!("{proto};q=2")], Sse),
            (&[&format!("{proto};q=NaN")], Sse),
            (&[&format!("{proto};v=1")], Protobuf),
            (&[&format!("{proto}+x")], Sse),
            (&[",,;;=,q=,"], Sse),
        ];
        for (accept, expected) in cases {
            assert_eq!(negotiate(accept), *expected, "Accept: {accept:?}");
        }
    }

    #[test]
    fn an_accept_that_is_not_text_is_sse() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_bytes(b"\xff application/vnd.ag-ui.event+proto").unwrap(),
        );
        assert_eq!(Encoding::negotiate(&headers, true), Encoding::Sse);
    }

    #[test]
    fn clients_before_agui_1_0_get_sse() {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(proto::MEDIA_TYPE));
        assert_eq!(Encoding::negotiate(&headers, true), Encoding::Protobuf);
        assert_eq!(Encoding::negotiate(&headers, false), Encoding::Sse);
    }

    #[test]
    fn sse_frames_are_data_lines() {
        let mut out = Vec::new();
        Encoding::Sse.write(Event::run_error("C", "m"), &mut out);
        assert_eq!(
            out,
            b"data: {\"type\":\"RUN_ERROR\",\"message\":\"m\",\"code\":\"C\"}\n\n"
        );
    }
}
