//! Serializers: one server codec and one client codec per system, all
//! speaking the logical schema of `proto/kv.proto` over the same datapath.
//!
//! A server codec decodes a request into a [`Request`] view (borrowing the
//! received buffer where the serializer allows it), lets the [`Store`] run
//! it, and sends the [`Status`] and values back by its best path: Cornflakes
//! with serialize-and-send (values of at least the threshold go out
//! zero-copy), protobuf and FlatBuffers encoded straight into pinned
//! memory, Cap'n Proto as its segment list.

use ::cornflakes::RcBuf;
use cornflakes_datapath::{ConnId, Datapath, InPlace, Prepared, Received, SendError, Span};

use crate::protocol::Status;
pub use crate::protocol::{Request, ResponseVals};
use crate::store::Store;

pub mod capnp;
pub mod cornflakes;
pub mod flatbuffers;
pub mod prost;
pub mod protowire;
pub mod rkyv;

/// Encoded messages at least this long are written into pinned memory and
/// sent zero-copy by the prost, FlatBuffers and Cap'n Proto codecs; shorter
/// ones are written into a reused heap buffer and copied by the datapath
/// (the measured crossover on the shared-memory datapath, see [`prost`];
/// equal to Cornflakes' default field threshold).
pub const ZERO_COPY_MIN: usize = ::cornflakes::field::DEFAULT_THRESHOLD;

/// Why a server codec could not handle a request.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    /// The request could not be decoded; it is dropped and counted.
    #[error("malformed request")]
    Malformed,
    /// Sending the response failed for good (not back-pressure, which the
    /// codec retries).
    #[error(transparent)]
    Send(#[from] SendError),
}

/// The server half of a serializer.
pub trait ServerCodec {
    /// Decodes `rx`, runs it on `store` and sends the response to `rx.conn`
    /// with `rx.msg_id`. Retries on [`SendError::Full`] after polling
    /// completions; a response too large to send is replaced by
    /// [`Status::TooLarge`].
    fn handle<D: Datapath>(&mut self, dp: &mut D, store: &mut Store, rx: &Received) -> Result<(), HandleError>;

    /// [`handle`](Self::handle) of a message received in place
    /// ([`Datapath::receives_in_place`]). By default its parts left in the
    /// peer's pool are copied into a buffer of [`Datapath::pool`] first
    /// (the gather the datapath would have done); a codec that can answer
    /// from the parts where they lie overrides it.
    fn handle_in_place<D: Datapath>(
        &mut self,
        dp: &mut D,
        store: &mut Store,
        msg: &InPlace,
    ) -> Result<(), HandleError> {
        let rx = gather_in_place(dp, msg)?;
        self.handle(dp, store, &rx)
    }

    /// Called after each received batch (reset arenas, release scratch).
    fn end_batch(&mut self) {}

    /// Changes the zero-copy threshold of fields set from now on (hybrid
    /// codecs; the others have none).
    fn set_threshold(&mut self, _threshold: usize) {}

    /// Switches serialize-and-send on or off for responses sent from now on
    /// (the Cornflakes codec; the others have one send path).
    fn set_serialize_and_send(&mut self, _on: bool) {}
}

/// `msg` whole in our memory: as it is when nothing of it was left in the
/// peer's pool, else copied into a new buffer of `dp`'s (shared) pool.
pub fn gather_in_place<D: Datapath>(dp: &mut D, msg: &InPlace) -> Result<Received, HandleError> {
    let payload = match msg.as_local() {
        Some(local) => local.clone(),
        None => {
            let mut buf = dp.pool().alloc(msg.len()).map_err(|e| HandleError::Send(e.into()))?;
            msg.copy_to_slice(buf.as_mut_slice()).map_err(|e| HandleError::Send(e.into()))?;
            buf.freeze()
        }
    };
    Ok(Received { conn: msg.conn, msg_id: msg.msg_id, payload })
}

/// The client half of a serializer.
pub trait ClientCodec {
    /// Encodes `req` and queues it on `dp` (flushed by the caller). Values
    /// in `dp`'s pool may be sent zero-copy where the serializer can.
    fn send_request<D: Datapath>(
        &mut self,
        dp: &mut D,
        conn: ConnId,
        msg_id: u32,
        req: &Request<'_>,
    ) -> Result<(), SendError>;

    /// `req` encoded once, for sending any number of times with
    /// [`Prepared::push`] under fresh message ids (a load generator's
    /// repeated requests): exactly what [`send_request`](Self::send_request)
    /// pushes, captured, so the wire bytes are the same.
    fn prepare_request<D: Datapath>(&mut self, dp: &D, req: &Request<'_>) -> Result<Prepared, SendError> {
        Prepared::capture(dp, |capture| self.send_request(capture, ConnId(0), 0, req))
    }

    /// Decodes a response and hands its status and values to `check`.
    /// Returns `Err` when the bytes are not a response of this serializer.
    fn read_response(&mut self, payload: &RcBuf, check: &mut dyn FnMut(Status, &[&[u8]])) -> Result<(), Malformed>;

    /// Whether [`read_response_in_place`](Self::read_response_in_place)
    /// reads responses in place. When it does not (the default), a
    /// response with parts left in the server's pool is copied into our
    /// memory first and read with [`read_response`](Self::read_response).
    fn reads_in_place(&self) -> bool {
        false
    }

    /// [`read_response`](Self::read_response) for a response received in
    /// place, part of which is left in the server's pool
    /// ([`Datapath::recv_batch_in_place`]): hands the values to `check` as
    /// [`Span`]s. A response wholly in our memory goes to `read_response`
    /// instead. Called only when [`reads_in_place`](Self::reads_in_place);
    /// the default says the bytes are not a response.
    fn read_response_in_place(
        &mut self,
        msg: &InPlace,
        check: &mut dyn FnMut(Status, &[Span<'_>]),
    ) -> Result<(), Malformed> {
        let _ = (msg, check);
        Err(Malformed)
    }

    /// Called after each received batch (reset arenas, release scratch).
    fn end_batch(&mut self) {}
}

/// A response that could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed response")]
pub struct Malformed;

/// Pushes with [`retry_full`] (a server, which must answer) or once (a
/// client: its caller handles back-pressure). Shared by the codecs that
/// build their own segment lists.
#[inline]
pub(crate) fn push<D: Datapath>(
    dp: &mut D,
    retry: bool,
    mut f: impl FnMut(&mut D) -> Result<(), SendError>,
) -> Result<(), SendError> {
    if retry {
        retry_full(dp, f)
    } else {
        f(dp)
    }
}

/// How long [`retry_full`] keeps retrying before giving up.
pub const RETRY_FOR: std::time::Duration = std::time::Duration::from_millis(50);

/// Sends with `f`, polling completions while the datapath pushes back with
/// [`SendError::Full`] (a datapath-wide resource: the UDP in-flight table,
/// a shm ring when parking is off), for at most [`RETRY_FOR`]; then returns
/// it. [`SendError::Backlogged`] (one connection's peer is not reading) is
/// returned at once: waiting for one client would stall every other one,
/// so the caller drops and counts.
pub fn retry_full<D: Datapath>(
    dp: &mut D,
    mut f: impl FnMut(&mut D) -> Result<(), SendError>,
) -> Result<(), SendError> {
    let mut since: Option<std::time::Instant> = None;
    loop {
        match f(dp) {
            Err(SendError::Full) => {
                let start = *since.get_or_insert_with(std::time::Instant::now);
                if start.elapsed() > RETRY_FOR {
                    return Err(SendError::Full);
                }
                dp.poll_completions()?;
            }
            other => return other,
        }
    }
}
