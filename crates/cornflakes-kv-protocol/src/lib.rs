//! The key-value protocol of `cornflakes-kv`: operations, statuses, limits
//! and the decoded form of a request, shared by every serializer, by the
//! store that runs requests and by the workload generators that make them.
//! The messages themselves are in `crates/cornflakes-kv/proto/kv.proto`.
//!
//! This crate holds types only (no I/O, no serializer), so that a crate
//! that needs to speak of requests (`cornflakes-workloads`) does not pull
//! in the datapaths and serializers of `cornflakes-kv`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use smallvec::SmallVec;

/// A decoded request: borrowed views of its fields. Every server codec
/// decodes into this, and the store runs it.
#[derive(Debug, Default)]
pub struct Request<'r> {
    /// The `op` number (checked by the store, so unknown ones get
    /// [`Status::UnknownOp`]).
    pub op: u32,
    /// Keys.
    pub keys: SmallVec<[&'r [u8]; 4]>,
    /// Values.
    pub vals: SmallVec<[&'r [u8]; 4]>,
    /// Element index (get-from-list).
    pub index: u32,
}

/// Values of a response, borrowed from the store or the request.
pub type ResponseVals<'r> = SmallVec<[&'r [u8]; 8]>;

/// A request's operation (the `op` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Op {
    /// `keys[0]` → its value, which must be a single buffer.
    Get = 1,
    /// `keys[0] := vals` (one value, or the elements of a list value).
    Put = 2,
    /// `keys[i]` → one single value each, in order.
    GetM = 3,
    /// `keys[0]` → every element of its value.
    GetList = 4,
    /// `keys[0]` → element `index` of its value.
    GetFromList = 5,
    /// Appends `vals[0]` to the list value of `keys[0]` (created if absent).
    Append = 6,
    /// `keys[i] := vals[i]`, single values.
    PutM = 7,
    /// Returns `vals` as they came (the echo experiment; no store access).
    Echo = 8,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 8] = [Op::Get, Op::Put, Op::GetM, Op::GetList, Op::GetFromList, Op::Append, Op::PutM, Op::Echo];

    /// The operation with wire number `n`.
    pub fn from_u32(n: u32) -> Option<Op> {
        Op::ALL.get((n as usize).wrapping_sub(1)).copied()
    }

    /// Short name for tables and errors.
    pub fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Put => "put",
            Op::GetM => "getm",
            Op::GetList => "get-list",
            Op::GetFromList => "get-from-list",
            Op::Append => "append",
            Op::PutM => "putm",
            Op::Echo => "echo",
        }
    }
}

/// A response's status (the `status` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Status {
    /// Done; `vals` holds the result.
    Ok = 0,
    /// A key is not in the store (or the list index is past its end).
    NotFound = 1,
    /// The request is well-formed but its fields do not fit the operation
    /// (missing key, wrong number of values, list value for `get`).
    BadRequest = 2,
    /// A key or value exceeds the server's limits, or a response would
    /// exceed what one message can carry.
    TooLarge = 3,
    /// The `op` number is unknown.
    UnknownOp = 4,
    /// The server's pool is exhausted; retry later.
    NoMemory = 5,
}

impl Status {
    /// The status with wire number `n`.
    pub fn from_u32(n: u32) -> Option<Status> {
        Some(match n {
            0 => Status::Ok,
            1 => Status::NotFound,
            2 => Status::BadRequest,
            3 => Status::TooLarge,
            4 => Status::UnknownOp,
            5 => Status::NoMemory,
            _ => return None,
        })
    }
}

/// Limits the server enforces on every request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest key, bytes.
    pub max_key: usize,
    /// Longest value (one element), bytes.
    pub max_value: usize,
    /// Most keys in one request.
    pub max_keys: usize,
    /// Most elements in a list value.
    pub max_list: usize,
    /// Largest response (sum of the values it carries), bytes.
    pub max_response: usize,
}

impl Limits {
    /// `TooLarge` for a request with more keys than allowed.
    pub fn check_keys(&self, keys: usize) -> Result<(), Status> {
        if keys > self.max_keys {
            Err(Status::TooLarge)
        } else {
            Ok(())
        }
    }

    /// `TooLarge` for a response carrying more value bytes than allowed.
    pub fn check_response(&self, value_bytes: usize) -> Result<(), Status> {
        if value_bytes > self.max_response {
            Err(Status::TooLarge)
        } else {
            Ok(())
        }
    }

    /// `TooLarge` for an echo of `keys` keys and `value_bytes` of values
    /// (the request's values come back in the response).
    pub fn check_echo(&self, keys: usize, value_bytes: usize) -> Result<(), Status> {
        self.check_keys(keys).and_then(|()| self.check_response(value_bytes))
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_key: 1024, max_value: 1 << 20, max_keys: 64, max_list: 4096, max_response: 1 << 20 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_is_refused_for_too_many_keys_or_too_many_value_bytes() {
        let l = Limits::default();
        assert_eq!(l.check_echo(l.max_keys, l.max_response), Ok(()));
        assert_eq!(l.check_echo(l.max_keys + 1, 0), Err(Status::TooLarge));
        assert_eq!(l.check_echo(0, l.max_response + 1), Err(Status::TooLarge));
    }

    #[test]
    fn op_numbers_round_trip() {
        for op in Op::ALL {
            assert_eq!(Op::from_u32(op as u32), Some(op));
        }
        assert_eq!(Op::from_u32(0), None);
        assert_eq!(Op::from_u32(9), None);
        assert_eq!(Op::from_u32(u32::MAX), None);
    }

    #[test]
    fn status_numbers_round_trip() {
        for n in 0..6 {
            assert_eq!(Status::from_u32(n).map(|s| s as u32), Some(n));
        }
        assert_eq!(Status::from_u32(6), None);
    }
}
