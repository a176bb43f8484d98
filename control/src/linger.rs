//! Lingering close for the public listener (RFC 9112 §9.6, "Tear-down").
//!
//! When a response goes out before the request body was read (a 413 for a body over
//! [`crate::api::BODY_LIMIT`], a 401 to a large unauthenticated upload, …), hyper does not
//! read the rest: it sends the response and closes. A socket closed with unread data in its
//! receive buffer, or receiving data after it was closed, makes the kernel answer with a TCP
//! RST, and the RST makes the client's next send fail: the client still uploading never reads
//! the response that reached it (over TLS in most tries; over plain HTTP as soon as the body
//! outgrows the socket buffers). So the connection's socket is not closed at once: its write
//! side is shut (after TLS's close_notify, when hyper closes gracefully), then what the client
//! still sends is read and discarded until it closes its side, and only then is the socket
//! closed. The client finishes its upload and reads the error.
//!
//! The draining is bounded: at most [`LINGER_BYTES`] and [`LINGER_TIME`] per connection, then
//! the socket is closed anyway; a client cannot make the server read unbounded data or keep a
//! closed connection open.
//!
//! Nor can a client keep a connection open by not reading: a write that makes no progress for
//! [`WRITE_STALL`] fails with `TimedOut`, hyper drops the connection, and it closes as above. An
//! event stream's client that stops reading is cut from the events at once (its buffer is
//! bounded: `crate::events`), but without this its connection, and what hyper holds for it,
//! would stay until the client went away. The clock starts once the socket's buffers are full
//! (the kernel sizes a send buffer by the connection's congestion window: tens of KiB on a
//! network, past a megabyte on loopback), so a stream of small events takes that long to stall.

use std::future::{Future, Ready, ready};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use partyline_shared::sync::lock;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use crate::per_address::{AddressSlot, PerAddress};

/// Most bytes read and discarded from a closing connection before it is closed anyway.
pub const LINGER_BYTES: usize = 4 * 1024 * 1024;
/// Longest a closing connection is drained before it is closed anyway.
pub const LINGER_TIME: Duration = Duration::from_secs(2);

/// The most connections the public listener holds at once (each a file descriptor, a `/janus`
/// one two): the package's unit gives control `LimitNOFILE=16384`, four times this, so that a
/// full listener leaves room for Janus's link, the events listener and the files.
pub const MAX_CONNECTIONS: usize = 4096;

/// How long a connection may take for its TLS handshake, its request's headers, or the next
/// request on a kept-alive connection: then it is closed (`crate::server` sets these on the
/// listener). A browser opens a new one when it needs it; event streams and WebSockets, once
/// answered, are not affected.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest a write may wait for the client to make room (to read) before the connection is
/// closed. A client that has taken nothing for this long is gone for partyline's purposes: a
/// browser's WebRTC session gives up on a peer silent for 30 s too (ICE consent, RFC 7675), and
/// a live client short of bandwidth still takes some bytes now and then, which restarts it.
pub const WRITE_STALL: Duration = Duration::from_secs(30);

/// An `axum_server` acceptor whose connections close with a [`Lingering`] close and give up on
/// a client that does not read, and which holds at most a set number of connections at once
/// ([`MAX_CONNECTIONS`] on the public listener).
/// Under TLS it is the inner acceptor of the rustls one, so that it drains the raw TCP stream
/// and counts connections still in their handshake.
///
/// A connection over the cap is closed at once: the cap keeps the process's file descriptors
/// (two per `/janus` connection: the browser's and Janus's) under its open-file limit, so that
/// the listener, Janus's link and the files keep working whatever clients hold open. The
/// listener's timeouts (`crate::server`) free the idle ones.
#[derive(Debug, Clone)]
pub struct LingeringAcceptor {
    slots: Arc<Semaphore>,
    max: usize,
    /// Each address's share of the cap, when it has one (the public listener's).
    per_address: Option<PerAddress>,
    /// When a connection over the cap was last logged: a flood is one warning a minute, not one
    /// per connection.
    last_warned: Arc<Mutex<Option<Instant>>>,
}

impl LingeringAcceptor {
    /// Holds at most `max` connections at once.
    pub fn new(max: usize) -> Self {
        Self { slots: Arc::new(Semaphore::new(max)), max, per_address: None, last_warned: Arc::default() }
    }

    /// Holds at most each address's share of the cap too ([`PerAddress`]).
    pub fn with_per_address(mut self, per_address: PerAddress) -> Self {
        self.per_address = Some(per_address);
        self
    }

    /// The connections open now.
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// The most connections held at once.
    pub fn max(&self) -> usize {
        self.max
    }

    fn warn_full(&self, stream: &TcpStream, whose: &str) {
        let mut last = lock(&self.last_warned);
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
            tracing::warn!(
                max = self.max,
                peer,
                "{whose} connection cap reached: its new connections are closed until some end (logged once a minute)"
            );
        }
    }
}

/// The least time between two warnings of a full connection cap.
const WARN_EVERY: Duration = Duration::from_secs(60);

impl<S> axum_server::accept::Accept<TcpStream, S> for LingeringAcceptor {
    type Stream = Lingering;
    type Service = S;
    type Future = Ready<io::Result<(Lingering, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let address_slot = match (&self.per_address, stream.peer_addr()) {
            (Some(per_address), Ok(peer)) => match per_address.take(peer.ip()) {
                Some(slot) => Some(slot),
                None => {
                    self.warn_full(&stream, "an address's");
                    return ready(Err(io::Error::other("the address's connection cap reached")));
                }
            },
            _ => None,
        };
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            self.warn_full(&stream, "the listener's");
            return ready(Err(io::Error::other("connection cap reached")));
        };
        let mut stream = Lingering::new(stream, WRITE_STALL);
        stream.slot = Some((slot, address_slot));
        ready(Ok((stream, service)))
    }
}

/// A TCP stream whose writes fail once they have made no progress for its write-stall time,
/// and that, when dropped, drains the peer's remaining data (bounded) in a task of its own
/// before the socket is closed.
#[derive(Debug)]
pub struct Lingering {
    /// `None` only once dropped.
    stream: Option<TcpStream>,
    write_stall: Duration,
    /// Running while writes wait for the client; `None` after any progress.
    stalled: Option<Pin<Box<Sleep>>>,
    /// Its place under the acceptor's cap (and its address's), given back once the socket is
    /// closed.
    slot: Option<(OwnedSemaphorePermit, Option<AddressSlot>)>,
}

impl Lingering {
    fn new(stream: TcpStream, write_stall: Duration) -> Lingering {
        Lingering { stream: Some(stream), write_stall, stalled: None, slot: None }
    }

    fn stream(&mut self) -> io::Result<Pin<&mut TcpStream>> {
        self.stream.as_mut().map(Pin::new).ok_or_else(|| io::ErrorKind::NotConnected.into())
    }

    /// `write`'s outcome, unless it is one more wait on a client stalled for too long: the
    /// timer's wake-up makes hyper write again, and that write fails.
    fn unless_stalled(&mut self, cx: &mut Context<'_>, write: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if write.is_ready() {
            self.stalled = None;
            return write;
        }
        let write_stall = self.write_stall;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(write_stall)));
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let peer = self.stream.as_ref().and_then(|s| s.peer_addr().ok()).map(|a| a.to_string()).unwrap_or_default();
        tracing::debug!(peer, ?write_stall, "closing a connection whose client does not read");
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client has not read for too long")))
    }
}

impl AsyncRead for Lingering {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.stream()?.poll_read(cx, buf)
    }
}

impl AsyncWrite for Lingering {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let write = self.stream()?.poll_write(cx, buf);
        self.unless_stalled(cx, write)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let write = self.stream()?.poll_write_vectored(cx, bufs);
        self.unless_stalled(cx, write)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.as_ref().is_some_and(AsyncWrite::is_write_vectored)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream()?.poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream()?.poll_shutdown(cx)
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let Some(stream) = self.stream.take() else { return };
        let slot = self.slot.take();
        // Connections are dropped on the runtime; outside one (never, in practice), close.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                linger(stream).await;
                drop(slot);
            });
        }
    }
}

/// Shuts the write side (a FIN after whatever was written: a no-op if hyper already did), then
/// reads and discards until the peer closes, an error, or the bounds; dropping the stream then
/// closes the socket.
async fn linger(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let deadline = tokio::time::Instant::now() + LINGER_TIME;
    let mut buf = vec![0; 64 * 1024];
    let mut drained = 0;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(n)) => drained += n,
            Err(_) => break,
        }
        if drained >= LINGER_BYTES {
            break;
        }
    }
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    tracing::debug!(peer, drained, "closing a connection whose client is still sending");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket pair: the server side wrapped in [`Lingering`], the client side plain.
    async fn pair() -> (Lingering, TcpStream) {
        pair_stalling_after(WRITE_STALL).await
    }

    async fn pair_stalling_after(write_stall: Duration) -> (Lingering, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        (Lingering::new(accepted.expect("accept").0, write_stall), client.expect("connect"))
    }

    /// The package's unit gives control the file descriptors a full listener needs (two per
    /// `/janus` connection) with room to spare.
    #[test]
    fn the_unit_s_open_file_limit_covers_a_full_listener() {
        let unit = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../packaging/systemd/partyline-control.service"
        ))
        .expect("the unit");
        let limit: usize = unit
            .lines()
            .find_map(|l| l.strip_prefix("LimitNOFILE="))
            .and_then(|v| v.trim().parse().ok())
            .expect("LimitNOFILE in the unit");
        assert!(limit >= 4 * MAX_CONNECTIONS, "LimitNOFILE={limit} for {MAX_CONNECTIONS} connections");
    }

    /// Past the cap, a connection is closed at once; a place comes back once a connection's
    /// socket is closed (after its lingering close).
    #[tokio::test]
    async fn connections_over_the_cap_are_closed_and_a_closed_one_frees_its_place() {
        use axum_server::accept::Accept;
        let acceptor = LingeringAcceptor::new(2);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr");
        let mut clients = Vec::new();
        let mut accepted = Vec::new();
        for _ in 0..3 {
            let (client, server) = tokio::join!(TcpStream::connect(address), listener.accept());
            clients.push(client.expect("connect"));
            accepted.push(acceptor.accept(server.expect("accept").0, ()).await);
        }
        assert!(accepted[0].is_ok() && accepted[1].is_ok());
        assert!(accepted[2].is_err(), "the third is over the cap");
        assert_eq!(acceptor.open(), 2);
        let mut third = clients.pop().expect("third");
        let mut buf = [0; 1];
        assert_eq!(third.read(&mut buf).await.expect("closed, not reset"), 0, "closed at once");
        let first = accepted.remove(0);
        drop(first);
        drop(clients.remove(0));
        tokio::time::timeout(LINGER_TIME * 2, async {
            while acceptor.open() > 1 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the closed connection gives its place back");
    }

    /// The response written before the drop reaches a client that first sends all it had to
    /// send (more than fits the socket buffers), then reads.
    #[tokio::test]
    async fn a_client_still_sending_reads_the_response_after_the_close() {
        let (mut server, mut client) = pair().await;
        server.write_all(b"response").await.expect("write");
        server.shutdown().await.expect("shutdown");
        drop(server);
        let upload = vec![b'a'; 3 * 1024 * 1024];
        client.write_all(&upload).await.expect("the upload is not reset");
        let mut response = Vec::new();
        client.read_to_end(&mut response).await.expect("read");
        assert_eq!(response, b"response");
    }

    /// A client that sends forever is cut off after the bounds.
    #[tokio::test]
    async fn the_drain_is_bounded() {
        let (server, mut client) = pair().await;
        drop(server);
        let chunk = vec![b'a'; 64 * 1024];
        let started = std::time::Instant::now();
        let mut sent = 0;
        let error = loop {
            match client.write_all(&chunk).await {
                Ok(()) => sent += chunk.len(),
                Err(e) => break e,
            }
            assert!(started.elapsed() < LINGER_TIME * 5, "still draining after {sent} bytes");
        };
        assert!(matches!(error.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe), "{error}");
        assert!(sent >= LINGER_BYTES, "drained {sent} bytes");
    }

    /// A client that trickles data, or none, is cut off after the time bound.
    #[tokio::test]
    async fn the_drain_is_bounded_in_time() {
        let (server, mut client) = pair().await;
        drop(server);
        let started = std::time::Instant::now();
        let error = loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Err(e) = client.write_all(b"a").await {
                break e;
            }
            assert!(started.elapsed() < LINGER_TIME * 3, "still lingering after {:?}", started.elapsed());
        };
        assert!(started.elapsed() >= LINGER_TIME, "closed after {:?}: {error}", started.elapsed());
    }

    /// Writes to a client that never reads fail once they have waited for the stall time; a
    /// client that reads slower than the writer writes is never cut.
    #[tokio::test]
    async fn a_client_that_does_not_read_is_given_up_and_a_slow_one_is_not() {
        const STALL: Duration = Duration::from_millis(500);
        let chunk = vec![b'a'; 64 * 1024];

        let (mut server, _client) = pair_stalling_after(STALL).await;
        let mut last_progress = std::time::Instant::now();
        let error = loop {
            match server.write(&chunk).await {
                Ok(_) => last_progress = std::time::Instant::now(),
                Err(e) => break e,
            }
        };
        let waited = last_progress.elapsed();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
        assert!(waited >= STALL && waited < STALL * 3, "given up after {waited:?} without progress");

        let (mut server, mut client) = pair_stalling_after(STALL).await;
        let reader = tokio::spawn(async move {
            // 64 KiB at a time with pauses: slower than the writer, so that its writes wait
            // for room again and again, but never for the stall time. (The pauses are short
            // because a socket is writable again only once half its send buffer, which
            // loopback grows to megabytes, has gone.)
            let mut buf = vec![0; 64 * 1024];
            let mut read = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
            read
        });
        let started = std::time::Instant::now();
        while started.elapsed() < STALL * 5 {
            server.write_all(&chunk).await.expect("a slow reader is not cut");
        }
        drop(server);
        assert!(reader.await.expect("reader") > 0);
    }
}
