//! Messages encoded once and sent many times.
//!
//! A load generator repeats the same few requests millions of times; the
//! serializer's work of building each one again measures the client, not
//! the server it is there to load. [`Prepared::capture`] runs a send once
//! against a stand-in datapath that keeps what it is asked to push: the
//! bytes to copy and the pool buffers to send zero-copy, in wire order.
//! [`Prepared::push`] then sends exactly those segments with
//! [`Datapath::push_segments`], so the bytes on the wire are the ones the
//! captured send would have produced, under any message id.

use cornflakes::{AllocError, Message, Pool, RcBuf, RcBufMut};

use crate::{ConnId, Datapath, DatapathStats, Received, RecvError, Segment, SendError};

/// A message ready to be sent any number of times: its copied bytes and
/// its zero-copy buffers (held, so they stay intact), in wire order.
///
/// # Examples
///
/// ```
/// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
/// use cornflakes_datapath::{Datapath, Prepared, Segment};
///
/// let (mut client, mut server) = ShmDatapath::pair(ShmConfig::default())?;
/// let conn = client.connections().next().unwrap();
/// let value = client.pool().alloc_copy(&[7u8; 2048])?;
/// // Encoded once ...
/// let request = Prepared::capture(&client, |dp| {
///     dp.push_segments(conn, 0, &[Segment::Copy(b"GET "), Segment::ZeroCopy(value.clone())])
/// })?;
/// assert_eq!(request.len(), 4 + 2048);
/// // ... sent twice, under two message ids.
/// request.push(&mut client, conn, 1)?;
/// request.push(&mut client, conn, 2)?;
/// client.flush()?;
/// # let mut got = Vec::new();
/// # while got.len() < 2 {
/// #     server.recv_batch(&mut got, 2)?;
/// # }
/// # assert_eq!((got[0].msg_id, got[1].msg_id), (1, 2));
/// # assert_eq!(&got[1].payload[..4], b"GET ");
/// # assert_eq!(got[1].payload.len(), 4 + 2048);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    parts: Vec<Part>,
}

#[derive(Clone, Debug)]
enum Part {
    Copy(Box<[u8]>),
    ZeroCopy(RcBuf),
}

/// Segments a prepared message has at most; a capture with more is
/// refused (no datapath takes more in one send).
const MAX_PARTS: usize = 64;

impl Prepared {
    /// Runs `send` once against a stand-in for `dp` (same pools, so buffers
    /// allocated or recovered there are `dp`'s) and keeps the one message it
    /// pushes. `send` must push exactly one message, with
    /// [`Datapath::push_message`], [`Datapath::push_segments`] or the
    /// methods built on them; the connection and message id it gives are
    /// ignored. An error of `send` is returned; so is a capture of no
    /// message, of more than one, or of more than 64 segments.
    pub fn capture<D: Datapath>(
        dp: &D,
        send: impl FnOnce(&mut Capture<'_, D>) -> Result<(), SendError>,
    ) -> Result<Prepared, SendError> {
        let mut capture = Capture { inner: dp, got: None, extra: false };
        send(&mut capture)?;
        match (capture.got, capture.extra) {
            (Some(p), false) => Ok(p),
            (None, _) => Err(refused("the send pushed no message")),
            (Some(_), true) => Err(refused("the send pushed more than one message")),
        }
    }

    /// Sends the message to `conn` with `msg_id` (queued; flushed by the
    /// caller), as [`Datapath::push_segments`] would: the same errors, and
    /// [`SendError::Full`] is back-pressure to retry.
    #[inline]
    pub fn push<D: Datapath>(&self, dp: &mut D, conn: ConnId, msg_id: u32) -> Result<(), SendError> {
        let segments: smallvec::SmallVec<[Segment<'_>; 8]> = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Copy(b) => Segment::Copy(b),
                Part::ZeroCopy(b) => Segment::ZeroCopy(b.clone()),
            })
            .collect();
        dp.push_segments(conn, msg_id, &segments)
    }

    /// The message's length in bytes.
    pub fn len(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Copy(b) => b.len(),
                Part::ZeroCopy(b) => b.len(),
            })
            .sum()
    }

    /// Whether the message has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn refused(why: &str) -> SendError {
    SendError::Io(std::io::Error::other(format!("Prepared::capture: {why}")))
}

/// The stand-in datapath of [`Prepared::capture`]: the pools of the
/// datapath it stands for, and a send that keeps the message instead of
/// sending it. It receives nothing.
pub struct Capture<'d, D: Datapath> {
    inner: &'d D,
    got: Option<Prepared>,
    extra: bool,
}

impl<D: Datapath> Capture<'_, D> {
    fn keep(&mut self, parts: Vec<Part>) -> Result<(), SendError> {
        if parts.len() > MAX_PARTS {
            return Err(SendError::TooManySegments { count: parts.len(), max: MAX_PARTS });
        }
        if self.got.is_some() {
            self.extra = true;
        } else {
            self.got = Some(Prepared { parts });
        }
        Ok(())
    }
}

impl<D: Datapath> Datapath for Capture<'_, D> {
    fn pool(&self) -> &Pool {
        self.inner.pool()
    }

    fn scratch_pool(&self) -> &Pool {
        self.inner.scratch_pool()
    }

    fn alloc(&self, len: usize) -> Result<RcBufMut, AllocError> {
        self.inner.alloc(len)
    }

    fn recover(&self, data: &[u8]) -> Option<RcBuf> {
        self.inner.recover(data)
    }

    fn recv_batch(&mut self, _out: &mut Vec<Received>, _max: usize) -> Result<usize, RecvError> {
        Ok(0)
    }

    fn wait(&mut self, _timeout: std::time::Duration) -> Result<bool, RecvError> {
        Ok(false)
    }

    fn push_message<'a, M: Message<'a>>(&mut self, _conn: ConnId, _msg_id: u32, msg: &M) -> Result<(), SendError> {
        let layout = msg.layout();
        let mut first = vec![0u8; layout.first_segment_len()];
        msg.write_header_and_copies(&layout, &mut first)?;
        let mut parts = Vec::with_capacity(1 + layout.zero_copy_entries);
        parts.push(Part::Copy(first.into_boxed_slice()));
        msg.for_each_zero_copy(|b| parts.push(Part::ZeroCopy(b.clone())));
        self.keep(parts)
    }

    fn push_segments(&mut self, _conn: ConnId, _msg_id: u32, segments: &[Segment<'_>]) -> Result<(), SendError> {
        let parts = segments
            .iter()
            .map(|s| match s {
                Segment::Copy(b) => Part::Copy(Box::from(*b)),
                Segment::ZeroCopy(b) => Part::ZeroCopy(b.clone()),
            })
            .collect();
        self.keep(parts)
    }

    fn flush(&mut self) -> Result<(), SendError> {
        Ok(())
    }

    fn poll_completions(&mut self) -> Result<usize, SendError> {
        Ok(0)
    }

    fn stats(&self) -> DatapathStats {
        DatapathStats::default()
    }
}

#[cfg(test)]
mod tests {
    use cornflakes::{Arena, Message};

    use cornflakes_tests::example::GetM;

    use super::*;
    use crate::shm::{ShmConfig, ShmDatapath};

    fn pair() -> (ShmDatapath, ShmDatapath, ConnId) {
        let (client, server) = ShmDatapath::pair(ShmConfig::default()).unwrap();
        let conn = client.connections().next().unwrap();
        (server, client, conn)
    }

    fn receive(server: &mut ShmDatapath, n: usize) -> Vec<Received> {
        let mut got = Vec::new();
        let start = std::time::Instant::now();
        while got.len() < n && start.elapsed() < std::time::Duration::from_secs(10) {
            server.recv_batch(&mut got, n).unwrap();
        }
        got
    }

    #[test]
    fn a_prepared_message_sends_the_bytes_serialize_and_send_would() {
        let (mut server, mut client, conn) = pair();
        let big = client.pool().alloc_copy(&[9u8; 1500]).unwrap();
        let arena = Arena::new(client.pool());
        let mut m = GetM::new_in(&arena);
        m.set_id(77);
        m.append_keys("user:1");
        m.append_vals(&big);
        let prepared = Prepared::capture(&client, |dp| dp.push_message(conn, 5, &m)).unwrap();
        assert_eq!(prepared.len(), m.layout().total_len());
        client.push_message(conn, 1, &m).unwrap();
        prepared.push(&mut client, conn, 2).unwrap();
        prepared.push(&mut client, conn, 3).unwrap();
        client.flush().unwrap();
        let got = receive(&mut server, 3);
        assert_eq!(got.len(), 3);
        let want = m.serialize_to_vec().unwrap();
        for (r, id) in got.iter().zip([1, 2, 3]) {
            assert_eq!(r.msg_id, id);
            assert_eq!(&r.payload[..], &want[..]);
        }
        // The value went by descriptor, not copied, each time.
        assert!(client.stats().zero_copy_segments >= 3);
    }

    #[test]
    fn a_capture_needs_exactly_one_message() {
        let (_server, client, conn) = pair();
        let none = Prepared::capture(&client, |_| Ok(()));
        assert!(matches!(none, Err(SendError::Io(_))));
        let two = Prepared::capture(&client, |dp| {
            dp.push_buf(conn, 0, b"a")?;
            dp.push_buf(conn, 0, b"b")
        });
        assert!(matches!(two, Err(SendError::Io(_))));
        let failed = Prepared::capture(&client, |_| Err(SendError::Full));
        assert!(matches!(failed, Err(SendError::Full)));
    }

    #[test]
    fn held_buffers_outlive_the_application_s_handles() {
        let (mut server, mut client, conn) = pair();
        let value = client.pool().alloc_copy(&[3u8; 4096]).unwrap();
        let prepared =
            Prepared::capture(&client, |dp| dp.push_segments(conn, 0, &[Segment::ZeroCopy(value.clone())])).unwrap();
        drop(value);
        prepared.push(&mut client, conn, 9).unwrap();
        client.flush().unwrap();
        let got = receive(&mut server, 1);
        assert_eq!(got[0].payload.len(), 4096);
        assert!(got[0].payload.iter().all(|&b| b == 3));
    }
}
