//! The body of a run stream: AG-UI event batches framed in the request's [`Encoding`] (SSE
//! or protobuf), ready batches merged into one write, and the encoding's keep-alive (SSE: a
//! `: keep-alive` comment; protobuf has none) after each [`KEEP_ALIVE`] of silence.
//!
//! Under load the batches that piled up while the connection wrote leave in one write of up
//! to [`MAX_MERGED_CHUNK`] bytes; before a write the body gives the run scheduler turns
//! while what it gathered grows (at most [`MAX_TURNS`]), and never waits on a timer.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use std::future::Future;

use super::encoding::Encoding;
use crate::agui::Event;

/// Interval of keep-alive comments on quiet run streams.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Ready batches are merged into one write up to this size.
pub(crate) const MAX_MERGED_CHUNK: usize = 64 * 1024;
/// The most scheduler turns a gathered chunk waits for more (write batching).
const MAX_TURNS: u8 = 8;

/// The bytes of a stream of event batches.
pub(crate) struct EventBody<S> {
    batches: S,
    encoding: Encoding,
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

impl<S> std::fmt::Debug for EventBody<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBody")
            .field("encoding", &self.encoding)
            .field("gathered", &self.chunk.len())
            .finish_non_exhaustive()
    }
}

impl<S> EventBody<S> {
    /// Frames `batches` in `encoding`, with its keep-alive after every `interval` of silence.
    pub(crate) fn new(batches: S, encoding: Encoding, interval: Duration) -> Self {
        Self {
            batches,
            encoding,
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

impl<S: Stream<Item = Vec<Event>> + Unpin> Stream for EventBody<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let mut ended = false;
        loop {
            match Pin::new(&mut this.batches).poll_next(cx) {
                Poll::Ready(Some(batch)) => {
                    for event in batch {
                        this.encoding.write(event, &mut this.chunk);
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
            let Some(keep_alive) = this.encoding.keep_alive() else {
                return Poll::Pending;
            };
            if this.keep_alive.as_mut().poll(cx).is_ready() {
                return this.write(Bytes::from_static(keep_alive));
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
        let mut body = EventBody::new(batches, Encoding::Sse, KEEP_ALIVE);
        let first = body.next().await.unwrap().unwrap();
        assert_eq!(&first[..], b": keep-alive\n\n");
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
        let mut body = EventBody::new(
            tokio_stream::wrappers::ReceiverStream::new(rx),
            Encoding::Sse,
            KEEP_ALIVE,
        );
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

    #[tokio::test(start_paused = true)]
    async fn quiet_protobuf_streams_write_nothing_until_an_event() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Vec<Event>>(4);
        let batches = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut body = EventBody::new(batches, Encoding::Protobuf, KEEP_ALIVE);
        let quiet = tokio::time::timeout(KEEP_ALIVE * 3, body.next()).await;
        assert!(quiet.is_err(), "no keep-alive in protobuf");
        tx.send(vec![finished(), finished()]).await.unwrap();
        drop(tx);
        let chunk = body.next().await.unwrap().unwrap();
        let len = u32::from_be_bytes(chunk[..4].try_into().unwrap()) as usize;
        assert_eq!(chunk.len(), 2 * (4 + len), "two frames in one write");
        assert!(body.next().await.is_none());
    }
}
