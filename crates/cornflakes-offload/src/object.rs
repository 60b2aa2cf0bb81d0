//! The object model the engine walks: objects in an [`Arena`] as arrays of
//! fixed-size [`Slot`]s, one per field, laid out by a
//! [`MessageTable`](crate::MessageTable).
//!
//! ```text
//!  Arena (one per message in flight; owned by whoever holds its descriptor)
//!  slots: ┌──────────┬───────────────┬─────────────┬──────────┬──────────┬─────
//!         │Scalar(7) │Registered{b,..}│Message(#5)  │List{6,2} │ Scalar(1)│ ...
//!         └──────────┴───────────────┴──────┬──────┴────┬─────┴──────────┴─────
//!          ObjId(0): root, 4 slots          │           └─ 2 list items at 6..8
//!                                           └─ ObjId(5): nested object's slots
//!  heap:  [ inline bytes and strings, referenced by Bytes{off, len} ]
//!  registered buffers (engine side): BufId -> pool RcBuf, sent zero-copy
//! ```
//!
//! Everything is an index, never a pointer: the engine checks every slot it
//! reads against the arena's bounds and the table's types, so a wrong or
//! hostile object is an error ([`crate::EncodeError`]), never undefined
//! behaviour. An arena is `Send`: ownership moves through the descriptor
//! rings (a pointer move), so the application and the engine never share
//! one at the same time; the arena is handed back on the completion ring.

/// An object: the index of its first slot in its arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjId(pub u32);

/// A registered buffer: one the engine holds in its datapath's pool and
/// can send zero-copy (memory registration, as with an RDMA NIC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufId(pub u32);

/// One field's value. 16 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Slot {
    /// Not set: the field is not written.
    #[default]
    Empty,
    /// A scalar, in canonical form: signed 32-bit types sign-extended to 64
    /// bits, unsigned ones zero-extended, floats as their IEEE bits, bools 0
    /// or 1 (see the `Slot::from_*` constructors).
    Scalar(u64),
    /// Bytes or a string in the arena's heap.
    Bytes {
        /// Offset in the heap.
        off: u32,
        /// Length.
        len: u32,
    },
    /// Part of a registered buffer: sent zero-copy at or above the engine's
    /// threshold, copied below it.
    Registered {
        /// The buffer.
        buf: BufId,
        /// Offset in it.
        off: u32,
        /// Length.
        len: u32,
    },
    /// A nested message (present, possibly empty).
    Message(ObjId),
    /// A repeated field: `len` item slots starting at slot `start`.
    List {
        /// First item's slot index.
        start: u32,
        /// Number of items.
        len: u32,
    },
}

const _: () = assert!(std::mem::size_of::<Slot>() == 16);

impl Slot {
    /// An `int32`, `sint32`, `sfixed32` or enum value.
    pub fn from_i32(v: i32) -> Self {
        Self::Scalar(i64::from(v) as u64)
    }
    /// An `int64`, `sint64` or `sfixed64` value.
    pub fn from_i64(v: i64) -> Self {
        Self::Scalar(v as u64)
    }
    /// A `uint32` or `fixed32` value.
    pub fn from_u32(v: u32) -> Self {
        Self::Scalar(u64::from(v))
    }
    /// A `uint64` or `fixed64` value.
    pub fn from_u64(v: u64) -> Self {
        Self::Scalar(v)
    }
    /// A `float` value.
    pub fn from_f32(v: f32) -> Self {
        Self::Scalar(u64::from(v.to_bits()))
    }
    /// A `double` value.
    pub fn from_f64(v: f64) -> Self {
        Self::Scalar(v.to_bits())
    }
    /// A `bool` value.
    pub fn from_bool(v: bool) -> Self {
        Self::Scalar(u64::from(v))
    }
    /// The scalar's bits, if this is a scalar.
    pub fn scalar(self) -> Option<u64> {
        match self {
            Self::Scalar(v) => Some(v),
            _ => None,
        }
    }
}

/// Why an arena refused to grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("arena full: its slots or heap would pass their u32 index range or the configured limit")]
pub struct ArenaFull;

/// Objects of one message (see the [module docs](self)).
#[derive(Debug, Default, Clone)]
pub struct Arena {
    slots: Vec<Slot>,
    heap: Vec<u8>,
    limit: Option<usize>,
}

impl Arena {
    /// An empty arena.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty arena that refuses to hold more than `bytes` of slots and
    /// heap together (the engine's receive arenas: hostile input cannot
    /// make it allocate without limit).
    pub fn with_limit(bytes: usize) -> Self {
        Self { limit: Some(bytes), ..Self::default() }
    }

    /// Forgets every object and sets the limit (the engine's receive
    /// arenas, whoever recycled them).
    pub(crate) fn reset_with_limit(&mut self, bytes: usize) {
        self.clear();
        self.limit = Some(bytes);
    }

    /// Forgets every object, keeping the capacity (arenas are reused).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.heap.clear();
    }

    fn check_room(&self, slots: usize, heap: usize) -> Result<(), ArenaFull> {
        let new_slots = self.slots.len().checked_add(slots).ok_or(ArenaFull)?;
        let new_heap = self.heap.len().checked_add(heap).ok_or(ArenaFull)?;
        if new_slots > u32::MAX as usize || new_heap > u32::MAX as usize {
            return Err(ArenaFull);
        }
        if let Some(limit) = self.limit {
            if new_slots * std::mem::size_of::<Slot>() + new_heap > limit {
                return Err(ArenaFull);
            }
        }
        Ok(())
    }

    /// A new object of `slots` empty slots (a table's
    /// [`slots`](crate::MessageTable::slots)).
    ///
    /// # Errors
    ///
    /// [`ArenaFull`] past the arena's limit.
    pub fn alloc(&mut self, slots: u16) -> Result<ObjId, ArenaFull> {
        self.check_room(usize::from(slots), 0)?;
        let id = ObjId(self.slots.len() as u32);
        self.slots.resize(self.slots.len() + usize::from(slots), Slot::Empty);
        Ok(id)
    }

    /// Copies `data` into the heap; the slot to store in a bytes or string
    /// field.
    ///
    /// # Errors
    ///
    /// [`ArenaFull`] past the arena's limit.
    pub fn push_bytes(&mut self, data: &[u8]) -> Result<Slot, ArenaFull> {
        self.check_room(0, data.len())?;
        let off = self.heap.len() as u32;
        self.heap.extend_from_slice(data);
        Ok(Slot::Bytes { off, len: data.len() as u32 })
    }

    /// Stores `items` contiguously; the slot to store in a repeated field.
    ///
    /// # Errors
    ///
    /// [`ArenaFull`] past the arena's limit.
    pub fn push_list(&mut self, items: &[Slot]) -> Result<Slot, ArenaFull> {
        self.check_room(items.len(), 0)?;
        let start = self.slots.len() as u32;
        self.slots.extend_from_slice(items);
        Ok(Slot::List { start, len: items.len() as u32 })
    }

    /// Sets slot `slot` of `obj`. Returns `false` (and changes nothing)
    /// when the slot is outside the arena.
    pub fn set(&mut self, obj: ObjId, slot: u16, value: Slot) -> bool {
        match (obj.0 as usize).checked_add(usize::from(slot)).and_then(|i| self.slots.get_mut(i)) {
            Some(s) => {
                *s = value;
                true
            }
            None => false,
        }
    }

    /// Slot `slot` of `obj`, if inside the arena.
    #[inline]
    pub fn get(&self, obj: ObjId, slot: u16) -> Option<Slot> {
        self.slots.get((obj.0 as usize).checked_add(usize::from(slot))?).copied()
    }

    /// The items of a [`Slot::List`], if it is one inside the arena.
    #[inline]
    pub fn list(&self, slot: Slot) -> Option<&[Slot]> {
        match slot {
            Slot::List { start, len } => self.slots.get(start as usize..(start as usize).checked_add(len as usize)?),
            _ => None,
        }
    }

    /// The bytes of a [`Slot::Bytes`], if it is one inside the heap.
    #[inline]
    pub fn bytes(&self, slot: Slot) -> Option<&[u8]> {
        match slot {
            Slot::Bytes { off, len } => self.heap.get(off as usize..(off as usize).checked_add(len as usize)?),
            _ => None,
        }
    }

    /// Slots in use.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Heap bytes in use.
    pub fn heap_len(&self) -> usize {
        self.heap.len()
    }

    /// Appends `len` items to the end of the slots from `items` (decode).
    pub(crate) fn extend_slots(&mut self, items: impl Iterator<Item = Slot>, len: usize) -> Result<u32, ArenaFull> {
        self.check_room(len, 0)?;
        let start = self.slots.len() as u32;
        self.slots.extend(items);
        Ok(start)
    }
}
