//! One reply, one message (docs/design.md#6-projection-a2a-to-ag-ui, `docs/mapping.md` "One
//! reply, one message"): which AG-UI text message each piece of agent text belongs to, and
//! which pieces only repeat what the turn already shows. Pure; the live projection and the
//! history rebuild both feed it, in the order A2A keeps (history, artifacts, status), so both
//! yield the same messages.
//!
//! The rule, over one agent turn (it starts after a user message):
//! - a status or agent message whose messageId is new *continues* the open reply (token
//!   chunks: strands, ADK and a2a-sdk agents send each chunk with a fresh id) unless the
//!   reply was sealed or the agent marks it as a complete message (`adk_partial: false`);
//! - the same messageId re-sent yields only its new suffix (a2a-js re-sends cumulative text);
//! - a piece whose text (whitespace aside) is a run of the latest message's text — the whole
//!   reply again as an artifact or a final status message, artifact chunks retracing it — is
//!   an echo: nothing is shown, and the reply is sealed; if an echo goes on past the end of
//!   that text, only the new text is shown;
//! - a tool call, an interrupt or a finished artifact seals the reply; the next text starts a
//!   new message, with the id of its first piece.
//!
//! Cost: a piece costs its own length, plus one search of the latest message when a new
//! source starts (an echo's later chunks are matched where the last one ended).

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

/// Message metadata keys by which frameworks mark streaming chunks (ADK, kagent).
const PARTIAL_KEYS: [&str; 3] = ["adk_partial", "kagent_adk_partial", "kagent_partial"];

/// True if the agent marked a message as complete, not a streaming chunk
/// (`adk_partial: false`): it does not continue the open reply.
pub(crate) fn marked_complete(metadata: Option<&serde_json::Value>) -> bool {
    metadata.is_some_and(|m| {
        PARTIAL_KEYS
            .iter()
            .any(|k| m.get(*k) == Some(&serde_json::Value::Bool(false)))
    })
}

/// True if the agent marked a message as a streaming chunk (`kagent_adk_partial: true`).
pub(crate) fn marked_partial(metadata: Option<&serde_json::Value>) -> bool {
    metadata.is_some_and(|m| {
        PARTIAL_KEYS
            .iter()
            .any(|k| m.get(*k) == Some(&serde_json::Value::Bool(true)))
    })
}

/// What to do with the AG-UI text messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Start { id: String },
    Content { id: String, delta: String },
    End { id: String },
}

/// The message streaming now.
#[derive(Debug)]
struct Open {
    /// Its AG-UI id (the id of its first piece).
    id: String,
    /// The A2A source (messageId, or artifact message id) that wrote last, and its text.
    source: String,
    source_text: String,
    /// The last character of the message's text (whether the next piece continues it).
    /// Its text without whitespace is [`Replies::latest`] while it is open.
    last_char: Option<char>,
}

/// A source recognised as an echo of the latest message.
#[derive(Debug)]
struct Echo {
    source: String,
    /// Where in `latest` the echo has reached (byte offset into the squeezed text).
    at: usize,
    /// The echo ran past the end of `latest`: the rest of the source is new text, streamed
    /// into the open message (or a new one with the source's id).
    past_end: bool,
    /// The source's text so far (shown whole should it turn out not to be an echo).
    text: String,
}

/// A message piece shorter than this (whitespace aside) is an echo only if it repeats the
/// whole latest message: token chunks are short and often recur inside the text before them.
const MIN_SUFFIX_ECHO: usize = 24;

/// How a piece arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A status or agent message: `complete` when the agent marks it as not partial.
    Message { complete: bool },
    /// An artifact chunk: `append` continues the artifact; `last` ends it.
    Artifact { append: bool, last: bool },
}

/// The replies of one turn.
#[derive(Debug, Default)]
pub(crate) struct Replies {
    open: Option<Open>,
    /// The latest message of the turn (open or closed), squeezed: echoes are matched
    /// against it.
    latest: String,
    /// The next message-id-new piece starts a new message.
    sealed: bool,
    echo: Option<Echo>,
    /// Sources already finished as echoes or closed messages (their repeats yield nothing),
    /// by a keyed hash of their id: one word per chunk of a long reply, not its id.
    done_sources: HashSet<u64>,
    /// The key of those hashes (random per turn: an upstream cannot aim at a collision).
    id_hasher: RandomState,
}

/// `text` without whitespace: echoes differ from the reply in spacing and line ends.
fn squeeze(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    squeeze_into(text, &mut out);
    out
}

/// Appends `text` without whitespace to `out`.
fn squeeze_into(text: &str, out: &mut String) {
    if !text.is_ascii() {
        out.extend(text.chars().filter(|c| !c.is_whitespace()));
        return;
    }
    // ASCII: `char::is_whitespace` is exactly these six bytes there; the runs between them
    // are copied whole.
    let mut run_start = 0;
    for (i, byte) in text.bytes().enumerate() {
        if matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            out.push_str(&text[run_start..i]);
            run_start = i + 1;
        }
    }
    out.push_str(&text[run_start..]);
}

/// The same text, whitespace aside (how an echo is recognised).
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    a.chars()
        .filter(|c| !c.is_whitespace())
        .eq(b.chars().filter(|c| !c.is_whitespace()))
}

impl Replies {
    fn mark_done(&mut self, source: &str) {
        let key = self.id_hasher.hash_one(source);
        self.done_sources.insert(key);
    }

    fn is_done(&self, source: &str) -> bool {
        self.done_sources.contains(&self.id_hasher.hash_one(source))
    }

    /// Closes the open message and seals the reply (a tool call, an interrupt, the end).
    pub(crate) fn close(&mut self) -> Vec<Step> {
        self.sealed = true;
        self.echo = None;
        match self.open.take() {
            Some(open) => {
                self.mark_done(&open.source);
                vec![Step::End { id: open.id }]
            }
            None => Vec::new(),
        }
    }

    /// Marks `source`'s `text` as already shown (a snapshot the client holds): repeats of
    /// the source, and echoes of the text, yield nothing.
    pub(crate) fn shown(&mut self, source: &str, text: &str) {
        let _ = self.close();
        self.mark_done(source);
        if !text.trim().is_empty() {
            self.latest = squeeze(text);
        }
    }

    /// One piece of agent text from `source`.
    pub(crate) fn piece(&mut self, source: &str, text: &str, piece: Piece) -> Vec<Step> {
        let mut out = Vec::new();
        let same_source = self.open.as_ref().is_some_and(|o| o.source == source);
        let continues_echo = self.echo.as_ref().is_some_and(|e| e.source == source);
        match piece {
            // The same message re-sent (cumulative text) or an artifact's next chunk.
            Piece::Message { .. } if same_source => self.resend(text, &mut out),
            Piece::Artifact { append: true, .. } if same_source => self.append(text, &mut out),
            // A re-sent echo: only its new part can matter.
            Piece::Message { .. } if continues_echo => {
                self.follow_echo(source, text, true, &mut out)
            }
            Piece::Artifact { append: true, .. } if continues_echo => {
                self.follow_echo(source, text, false, &mut out)
            }
            // A finished source re-sent (a resubscribe snapshot): shown already.
            _ if self.is_done(source) => {}
            _ => self.new_source(source, text, piece, &mut out),
        }
        if let Piece::Artifact { last: true, .. } = piece {
            let ends_open = self.open.as_ref().is_some_and(|o| o.source == source);
            if ends_open {
                out.extend(self.close());
            } else if continues_echo || self.echo.as_ref().is_some_and(|e| e.source == source) {
                self.echo = None;
                self.mark_done(source);
            }
        }
        out
    }

    fn new_source(&mut self, source: &str, text: &str, piece: Piece, out: &mut Vec<Step>) {
        if text.is_empty() {
            return;
        }
        let squeezed = squeeze(text);
        // An echo of the latest message: an artifact whose text is a run of it, a message
        // that repeats it whole or its end (whitespace aside).
        let echo_at = match piece {
            _ if squeezed.is_empty() => None,
            Piece::Artifact { .. } => self.latest.find(&squeezed),
            Piece::Message { .. } => (squeezed == self.latest
                || (squeezed.len() >= MIN_SUFFIX_ECHO && self.latest.ends_with(&squeezed)))
            .then(|| self.latest.len() - squeezed.len()),
        };
        if let Some(at) = echo_at {
            self.sealed = true;
            self.echo = Some(Echo {
                source: source.to_owned(),
                at: at + squeezed.len(),
                past_end: false,
                text: text.to_owned(),
            });
            return;
        }
        let continues = match (piece, &self.open) {
            (Piece::Message { complete }, Some(open)) => {
                !complete
                    && !self.sealed
                    && (squeezed.starts_with(&self.latest) || continues_text(open.last_char, text))
            }
            _ => false,
        };
        self.mark_done(source);
        if continues {
            let open = self.open.as_mut().expect("checked");
            // Cumulative text under a fresh id ("Hel", then "Hello"): only the new end.
            let (delta, squeezed_delta) = if squeezed.starts_with(&self.latest) {
                let new = squeezed.len() - self.latest.len();
                (
                    tail_with_squeezed_len(text, new),
                    &squeezed[self.latest.len()..],
                )
            } else {
                (text, squeezed.as_str())
            };
            // The open message's buffers are reused: a chunk costs no allocation here.
            open.source.clear();
            open.source.push_str(source);
            open.source_text.clear();
            open.source_text.push_str(text);
            if !delta.is_empty() {
                let delta = delta.to_owned();
                self.push_squeezed_delta(delta, squeezed_delta, out);
            }
            return;
        }
        out.extend(self.close());
        self.start(source, text, out);
        if let Piece::Message { complete: true } = piece {
            self.sealed = true;
        }
    }

    fn start(&mut self, source: &str, text: &str, out: &mut Vec<Step>) {
        self.latest.clear();
        squeeze_into(text, &mut self.latest);
        self.sealed = false;
        self.echo = None;
        out.push(Step::Start {
            id: source.to_owned(),
        });
        if !text.is_empty() {
            out.push(Step::Content {
                id: source.to_owned(),
                delta: text.to_owned(),
            });
        }
        self.open = Some(Open {
            id: source.to_owned(),
            source: source.to_owned(),
            source_text: text.to_owned(),
            last_char: text.chars().next_back(),
        });
    }

    /// The open source re-sent: its new suffix, or the whole text if it does not extend.
    fn resend(&mut self, text: &str, out: &mut Vec<Step>) {
        let open = self.open.as_mut().expect("same source is open");
        let delta = match text.strip_prefix(open.source_text.as_str()) {
            Some(suffix) => suffix.to_owned(),
            None if text == open.source_text => String::new(),
            None => text.to_owned(),
        };
        if delta.is_empty() {
            return;
        }
        open.source_text.push_str(&delta);
        self.push_delta(delta, out);
    }

    /// The open artifact's next chunk.
    fn append(&mut self, text: &str, out: &mut Vec<Step>) {
        if text.is_empty() {
            return;
        }
        let open = self.open.as_mut().expect("same source is open");
        open.source_text.push_str(text);
        self.push_delta(text.to_owned(), out);
    }

    fn push_delta(&mut self, delta: String, out: &mut Vec<Step>) {
        squeeze_into(&delta, &mut self.latest);
        self.push_squeezed_delta(delta, "", out);
    }

    /// [`Self::push_delta`] where `squeezed` (the delta without whitespace) is known; it
    /// is appended to `latest` here.
    fn push_squeezed_delta(&mut self, delta: String, squeezed: &str, out: &mut Vec<Step>) {
        self.latest.push_str(squeezed);
        let open = self.open.as_mut().expect("open");
        if let Some(last) = delta.chars().next_back() {
            open.last_char = Some(last);
        }
        out.push(Step::Content {
            id: open.id.clone(),
            delta,
        });
    }

    /// An echo's next text (`whole`: the source re-sent in full, else a chunk of it).
    fn follow_echo(&mut self, source: &str, text: &str, whole: bool, out: &mut Vec<Step>) {
        let echo = self.echo.as_mut().expect("echo");
        if echo.past_end {
            // Past the reply: the rest is new text, already streaming in its own message.
            if self.open.as_ref().is_some_and(|o| o.source == source) {
                self.append(text, out);
            }
            return;
        }
        let squeezed = squeeze(text);
        if whole && self.latest.contains(&squeezed) {
            // The echo re-sent whole, still within the reply.
            return;
        }
        if !whole {
            echo.text.push_str(text);
        }
        let rest = &self.latest[echo.at..];
        if rest.starts_with(&squeezed) {
            echo.at += squeezed.len();
            return;
        }
        if squeezed.starts_with(rest) {
            // The echo runs past the end of the reply: show only what is new.
            let new_squeezed_len = squeezed.len() - rest.len();
            echo.at = self.latest.len();
            echo.past_end = true;
            let new_text = tail_with_squeezed_len(text, new_squeezed_len);
            if new_text.is_empty() {
                return;
            }
            // The echo retraced the whole open reply: what follows continues it.
            match self.open.as_mut() {
                Some(open) => {
                    open.source = source.to_owned();
                    open.source_text = text.to_owned();
                    self.push_delta(new_text.to_owned(), out);
                }
                _ => {
                    out.extend(self.close());
                    self.start(source, new_text, out);
                }
            }
            return;
        }
        // It diverged: not an echo after all; show it whole as its own message.
        let all = if whole {
            text.to_owned()
        } else {
            echo.text.clone()
        };
        self.echo = None;
        out.extend(self.close());
        self.start(source, &all, out);
    }
}

/// Whose text a piece is: the agent's answer, or its reasoning (the parts a framework marks
/// as thoughts, `dialect::is_thought`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Voice {
    Answer,
    Reasoning,
}

/// The suffix of a reasoning message's id: the A2A message (or artifact) that carries both
/// a thought and an answer gives each its own AG-UI message.
const REASONING_ID_SUFFIX: &str = ":reasoning";

impl Voice {
    /// The AG-UI id of this voice's message for the A2A `source`.
    fn message_id(self, source: &str) -> std::borrow::Cow<'_, str> {
        match self {
            Voice::Answer => source.into(),
            Voice::Reasoning => format!("{source}{REASONING_ID_SUFFIX}").into(),
        }
    }
}

/// The two voices of one turn, each under the reply rule ([`Replies`]): one message streams
/// at a time, so a message of one voice starting closes the other's open message (thinking,
/// then answering, then thinking again are three messages). The live projection and the
/// history rebuild both speak through it, so both yield the same messages.
#[derive(Debug, Default)]
pub(crate) struct Voices {
    answer: Replies,
    reasoning: Replies,
}

impl Voices {
    fn of(&mut self, voice: Voice) -> (&mut Replies, &mut Replies) {
        match voice {
            Voice::Answer => (&mut self.answer, &mut self.reasoning),
            Voice::Reasoning => (&mut self.reasoning, &mut self.answer),
        }
    }

    /// One piece of `voice`'s text from `source`.
    pub(crate) fn piece(
        &mut self,
        voice: Voice,
        source: &str,
        text: &str,
        piece: Piece,
    ) -> Vec<(Voice, Step)> {
        let id = voice.message_id(source);
        let (this, other) = self.of(voice);
        let steps = this.piece(&id, text, piece);
        let mut out = Vec::new();
        if steps.iter().any(|s| matches!(s, Step::Start { .. })) {
            let other_voice = match voice {
                Voice::Answer => Voice::Reasoning,
                Voice::Reasoning => Voice::Answer,
            };
            out.extend(other.close().into_iter().map(|s| (other_voice, s)));
        }
        out.extend(steps.into_iter().map(|s| (voice, s)));
        out
    }

    /// Closes whatever is open and seals both (a tool call, an interrupt, the end).
    pub(crate) fn close(&mut self) -> Vec<(Voice, Step)> {
        let mut out: Vec<(Voice, Step)> = self
            .reasoning
            .close()
            .into_iter()
            .map(|s| (Voice::Reasoning, s))
            .collect();
        out.extend(self.answer.close().into_iter().map(|s| (Voice::Answer, s)));
        out
    }

    /// A new turn: nothing open, nothing to echo.
    pub(crate) fn new_turn(&mut self) -> Vec<(Voice, Step)> {
        let out = self.close();
        *self = Self::default();
        out
    }

    /// Marks `source`'s text in `voice` as already shown ([`Replies::shown`]).
    pub(crate) fn shown(&mut self, voice: Voice, source: &str, text: &str) {
        let id = voice.message_id(source);
        self.of(voice).0.shown(&id, text);
    }
}

/// True if `next` reads as the next chunk of `before` rather than a message of its own:
/// whitespace or punctuation joins them, or a word (or number) is split between them. Token
/// streams break text this way; separate notes ("tick 1/10", "tick 2/10"; "Looking up…",
/// "Processing…") do not.
fn continues_text(before_last: Option<char>, next: &str) -> bool {
    let (Some(last), Some(first)) = (before_last, next.chars().next()) else {
        return true;
    };
    last.is_whitespace()
        || first.is_whitespace()
        || matches!(
            first,
            '.' | ',' | ';' | ':' | '!' | '?' | ')' | ']' | '}' | '\'' | '"' | '…' | '-'
        )
        || (last.is_alphabetic() && first.is_lowercase())
        || (last.is_ascii_digit() && first.is_ascii_digit())
}

/// The end of `text` holding its last `n` non-whitespace characters' bytes (and the
/// whitespace among them).
fn tail_with_squeezed_len(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    let mut count = 0;
    for (i, c) in text.char_indices().rev() {
        if !c.is_whitespace() {
            count += c.len_utf8();
            if count >= n {
                // With the whitespace before it: it separates the new text from the old.
                let start = text[..i].trim_end().len();
                return &text[start..];
            }
        }
    }
    text
}

/// The messages `steps` make, as `(id, text)`: what the client ends with.
#[cfg(test)]
fn collect(steps: impl IntoIterator<Item = Step>, into: &mut Vec<(String, String)>) {
    for step in steps {
        match step {
            Step::Start { id } => into.push((id, String::new())),
            Step::Content { id, delta } => {
                if let Some(m) = into.iter_mut().rev().find(|(m, _)| *m == id) {
                    m.1.push_str(&delta);
                }
            }
            Step::End { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ascii_squeeze_is_the_char_rule() {
        let all_ascii: String = (0u8..128).map(char::from).collect();
        for text in [
            all_ascii.as_str(),
            " a\tb\r\nc \x0b\x0cd ",
            "",
            "  ",
            "x\u{a0}y\u{2003}z\u{85}",
        ] {
            let mut fast = String::new();
            squeeze_into(text, &mut fast);
            let rule: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            assert_eq!(fast, rule, "{text:?}");
        }
    }

    const CHUNK: Piece = Piece::Message { complete: false };
    const WHOLE: Piece = Piece::Message { complete: true };
    const ARTIFACT: Piece = Piece::Artifact {
        append: false,
        last: true,
    };

    fn run(pieces: &[(&str, &str, Piece)]) -> Vec<(String, String)> {
        let mut r = Replies::default();
        let mut msgs = Vec::new();
        for (source, text, piece) in pieces {
            collect(r.piece(source, text, *piece), &mut msgs);
        }
        collect(r.close(), &mut msgs);
        msgs
    }

    fn texts(m: &[(String, String)]) -> Vec<&str> {
        m.iter().map(|(_, t)| t.as_str()).collect()
    }

    #[test]
    fn token_chunks_then_the_whole_text_make_one_message() {
        // strands default mode: a fresh messageId per chunk, then the artifact.
        let m = run(&[
            ("a", "Hello from strands.", CHUNK),
            ("b", " This reply", CHUNK),
            ("c", " arrives in chunks.", CHUNK),
            (
                "art",
                "Hello from strands. This reply arrives in chunks.\n",
                ARTIFACT,
            ),
        ]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].0, "a");
        assert_eq!(m[0].1, "Hello from strands. This reply arrives in chunks.");
    }

    #[test]
    fn cumulative_text_under_fresh_ids_yields_suffixes() {
        let m = run(&[
            ("a", "Hel", CHUNK),
            ("b", "Hello", CHUNK),
            ("c", "Hello you", CHUNK),
        ]);
        assert_eq!(texts(&m), ["Hello you"]);
        assert_eq!(m[0].0, "a");
    }

    #[test]
    fn cumulative_resends_of_one_id_yield_suffixes() {
        let m = run(&[
            ("a", "Hel", CHUNK),
            ("a", "Hello", CHUNK),
            ("a", "Hello!", CHUNK),
        ]);
        assert_eq!(texts(&m), ["Hello!"]);
    }

    #[test]
    fn a_progress_note_stays_and_the_reply_is_not_repeated() {
        let m = run(&[
            ("p", "Searching…", WHOLE),
            ("r1", "Found", CHUNK),
            ("r2", " it.", CHUNK),
            ("art", "Found it.", ARTIFACT),
            ("final", "Found it.", WHOLE),
        ]);
        assert_eq!(texts(&m), ["Searching…", "Found it."]);
        assert_eq!(m[1].0, "r1");
    }

    #[test]
    fn artifact_chunks_retracing_the_reply_are_an_echo_and_new_text_is_kept() {
        let chunk = |last| Piece::Artifact { append: true, last };
        let m = run(&[
            ("a", "One two", CHUNK),
            ("b", " three.", CHUNK),
            (
                "art",
                "One ",
                Piece::Artifact {
                    append: false,
                    last: false,
                },
            ),
            ("art", "two three.", chunk(false)),
            ("art", " And four.", chunk(true)),
        ]);
        assert_eq!(texts(&m), ["One two three. And four."]);
    }

    #[test]
    fn short_chunks_that_recur_in_the_text_are_not_echoes() {
        let m = run(&[
            ("a", "I saw the", CHUNK),
            ("b", " the", CHUNK),
            ("c", "!", CHUNK),
        ]);
        assert_eq!(texts(&m), ["I saw the the!"]);
    }

    #[test]
    fn an_artifact_that_only_starts_like_the_reply_is_shown_whole() {
        let chunk = |last| Piece::Artifact { append: true, last };
        let m = run(&[
            ("s", "It is working", WHOLE),
            (
                "art",
                "It",
                Piece::Artifact {
                    append: false,
                    last: false,
                },
            ),
            ("art", " is sunny", chunk(true)),
        ]);
        assert_eq!(texts(&m), ["It is working", "It is sunny"]);
    }

    #[test]
    fn separate_notes_stay_separate_messages() {
        let m = run(&[
            ("a", "tick 1/10", CHUNK),
            ("b", "tick 2/10", CHUNK),
            ("c", "Done.", CHUNK),
        ]);
        assert_eq!(texts(&m), ["tick 1/10", "tick 2/10", "Done."]);
        let m = run(&[
            ("a", "Hel", CHUNK),
            ("b", "lo", CHUNK),
            ("c", ", you", CHUNK),
        ]);
        assert_eq!(texts(&m), ["Hello, you"]);
    }

    #[test]
    fn a_new_artifact_is_its_own_message() {
        let m = run(&[
            ("s", "Here is the report.", CHUNK),
            ("art", "REPORT BODY", ARTIFACT),
        ]);
        assert_eq!(texts(&m), ["Here is the report.", "REPORT BODY"]);
    }

    #[test]
    fn a_resubscribe_snapshot_repeats_nothing() {
        let mut r = Replies::default();
        let mut m = Vec::new();
        collect(r.piece("a", "tick 1", WHOLE), &mut m);
        collect(r.piece("a", "tick 1", WHOLE), &mut m);
        collect(r.close(), &mut m);
        collect(r.piece("a", "tick 1", WHOLE), &mut m);
        assert_eq!(texts(&m), ["tick 1"]);
    }
}
