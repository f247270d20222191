//! The SSE body of a run: AG-UI event batches framed as `data: <compact JSON>\n\n`, ready
//! batches merged into one write, and a `: keep-alive` comment after each
//! [`KEEP_ALIVE`] of silence.
//!
//! Framing is LF only (CRLF breaks `@ag-ui/client`, agui.md §5.2); compact JSON has no raw
//! newlines, so every event is one `data:` line. Comment lines are ignored by SSE parsers,
//! `@ag-ui/client` included. Under load the batches that piled up while the connection wrote
//! leave in one write of up to [`MAX_MERGED_CHUNK`] bytes; before a write the body gives the
//! run scheduler turns while what it gathered grows (at most [`MAX_TURNS`]), and never waits
//! on a timer.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use std::future::Future;

use crate::agui::Event;

/// Interval of keep-alive comments on quiet run streams.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Ready batches are merged into one write up to this size.
pub(crate) const MAX_MERGED_CHUNK: usize = 64 * 1024;
const KEEP_ALIVE_COMMENT: &[u8] = b": keep-alive\n\n";
/// The most scheduler turns a gathered chunk waits for more (write batching).
const MAX_TURNS: u8 = 8;

/// Appends one SSE frame for `event` to `out`.
pub(crate) fn encode_frame(event: &Event, out: &mut Vec<u8>) {
    out.extend_from_slice(b"data: ");
    crate::agui::event::encode_into(event, out);
    out.extend_from_slice(b"\n\n");
}

/// The SSE bytes of a stream of event batches.
pub(crate) struct SseBody<S> {
    batches: S,
    interval: Duration,
    keep_alive: Pin<Box<tokio::time::Sleep>>,
    /// Frames gathered for the next write.
    chunk: Vec<u8>,
    /// The scheduler turn the body gives the run before writing what it gathered.
    turn: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// Turns given for the gathered chunk, and its size after the last one.
    turns: u8,
    size_at_turn: usize,
}

impl<S> std::fmt::Debug for SseBody<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseBody")
            .field("gathered", &self.chunk.len())
            .finish_non_exhaustive()
    }
}

impl<S> SseBody<S> {
    /// Frames `batches`, with a keep-alive comment after every `interval` of silence.
    pub(crate) fn new(batches: S, interval: Duration) -> Self {
        Self {
            batches,
            interval,
            keep_alive: Box::pin(tokio::time::sleep(interval)),
            chunk: Vec::new(),
            turn: None,
            turns: 0,
            size_at_turn: 0,
        }
    }

    fn write(&mut self, bytes: Bytes) -> Poll<Option<Result<Bytes, Infallible>>> {
        let deadline = tokio::time::Instant::now() + self.interval;
        self.keep_alive.as_mut().reset(deadline);
        Poll::Ready(Some(Ok(bytes)))
    }
}

impl<S: Stream<Item = Vec<Event>> + Unpin> Stream for SseBody<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let mut ended = false;
        loop {
            match Pin::new(&mut this.batches).poll_next(cx) {
                Poll::Ready(Some(batch)) => {
                    for event in &batch {
                        encode_frame(event, &mut this.chunk);
                    }
                    if this.chunk.len() >= MAX_MERGED_CHUNK {
                        break;
                    }
                }
                Poll::Ready(None) => {
                    ended = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        if this.chunk.is_empty() {
            if ended {
                return Poll::Ready(None);
            }
            if this.keep_alive.as_mut().poll(cx).is_ready() {
                return this.write(Bytes::from_static(KEEP_ALIVE_COMMENT));
            }
            return Poll::Pending;
        }
        // Write batching: before writing a small chunk, the run gets scheduler turns to hand
        // on what it is projecting now, as long as each turn brought more (at most
        // `MAX_TURNS`), so a busy stream writes many events per syscall. A quiet stream
        // loses one turn (microseconds, never a timer).
        let growing = this.turns == 0 || this.chunk.len() > this.size_at_turn;
        if !ended && growing && this.turns < MAX_TURNS && this.chunk.len() < MAX_MERGED_CHUNK {
            let turn = this
                .turn
                .get_or_insert_with(|| Box::pin(tokio::task::yield_now()));
            if turn.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.turn = None;
            this.turns += 1;
            this.size_at_turn = this.chunk.len();
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.turn = None;
        this.turns = 0;
        let chunk = std::mem::take(&mut this.chunk);
        this.write(Bytes::from(chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn finished() -> Event {
        Event::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            outcome: None,
            usage: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_streams_get_keep_alive_comments_and_end_with_the_run() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Vec<Event>>(4);
        let batches = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut body = SseBody::new(batches, KEEP_ALIVE);
        let first = body.next().await.unwrap().unwrap();
        assert_eq!(&first[..], KEEP_ALIVE_COMMENT);
        tx.send(vec![finished()]).await.unwrap();
        assert_eq!(
            &body.next().await.unwrap().unwrap()[..],
            b"data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n"
        );
        drop(tx);
        assert!(
            body.next().await.is_none(),
            "the body ends when the run does"
        );
    }

    #[tokio::test]
    async fn ready_batches_leave_in_one_write() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Vec<Event>>(8);
        for _ in 0..3 {
            tx.send(vec![finished()]).await.unwrap();
        }
        drop(tx);
        let mut body = SseBody::new(tokio_stream::wrappers::ReceiverStream::new(rx), KEEP_ALIVE);
        let chunk = body.next().await.unwrap().unwrap();
        assert_eq!(
            chunk
                .split(|b| *b == b'\n')
                .filter(|l| l.starts_with(b"data:"))
                .count(),
            3
        );
        assert!(body.next().await.is_none());
    }
}
