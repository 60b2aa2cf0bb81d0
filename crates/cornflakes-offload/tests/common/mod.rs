//! prost's types for `proto/offload.proto` (what prost-build emits for it,
//! written with the derive as the project's other prost baselines are), and
//! conversions between them and arena objects through the schema tables.
#![allow(dead_code)]

use cornflakes::{Pool, RcBuf};
use cornflakes_offload::{Arena, BufId, MessageTable, ObjId, SchemaSet, Slot};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Color {
    Unspecified = 0,
    Red = 1,
    Blue = -2,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Pair {
    #[prost(bytes = "vec", tag = "1")]
    pub a: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub b: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Inner {
    #[prost(int32, tag = "1")]
    pub id: i32,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(sint64, repeated, tag = "3")]
    pub deltas: Vec<i64>,
    #[prost(message, optional, boxed, tag = "4")]
    pub child: Option<Box<Inner>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Everything {
    #[prost(int32, tag = "1")]
    pub i32: i32,
    #[prost(int64, tag = "2")]
    pub i64: i64,
    #[prost(uint32, tag = "3")]
    pub u32: u32,
    #[prost(uint64, tag = "4")]
    pub u64: u64,
    #[prost(sint32, tag = "5")]
    pub s32: i32,
    #[prost(sint64, tag = "6")]
    pub s64: i64,
    #[prost(fixed32, tag = "7")]
    pub f32: u32,
    #[prost(fixed64, tag = "8")]
    pub f64: u64,
    #[prost(sfixed32, tag = "9")]
    pub sf32: i32,
    #[prost(sfixed64, tag = "10")]
    pub sf64: i64,
    #[prost(float, tag = "11")]
    pub fl: f32,
    #[prost(double, tag = "12")]
    pub db: f64,
    #[prost(bool, tag = "13")]
    pub flag: bool,
    #[prost(enumeration = "Color", tag = "14")]
    pub color: i32,
    #[prost(string, tag = "15")]
    pub text: String,
    #[prost(bytes = "vec", tag = "16")]
    pub data: Vec<u8>,
    #[prost(message, optional, tag = "17")]
    pub inner: Option<Inner>,
    #[prost(int32, optional, tag = "18")]
    pub maybe: Option<i32>,
    #[prost(int32, repeated, tag = "20")]
    pub r_i32: Vec<i32>,
    #[prost(int64, repeated, tag = "21")]
    pub r_i64: Vec<i64>,
    #[prost(uint32, repeated, tag = "22")]
    pub r_u32: Vec<u32>,
    #[prost(uint64, repeated, tag = "23")]
    pub r_u64: Vec<u64>,
    #[prost(sint32, repeated, tag = "24")]
    pub r_s32: Vec<i32>,
    #[prost(sint64, repeated, tag = "25")]
    pub r_s64: Vec<i64>,
    #[prost(fixed32, repeated, tag = "26")]
    pub r_f32: Vec<u32>,
    #[prost(fixed64, repeated, tag = "27")]
    pub r_f64: Vec<u64>,
    #[prost(sfixed32, repeated, tag = "28")]
    pub r_sf32: Vec<i32>,
    #[prost(sfixed64, repeated, tag = "29")]
    pub r_sf64: Vec<i64>,
    #[prost(float, repeated, tag = "30")]
    pub r_fl: Vec<f32>,
    #[prost(double, repeated, tag = "31")]
    pub r_db: Vec<f64>,
    #[prost(bool, repeated, tag = "32")]
    pub r_flag: Vec<bool>,
    #[prost(enumeration = "Color", repeated, tag = "33")]
    pub r_color: Vec<i32>,
    #[prost(string, repeated, tag = "34")]
    pub r_text: Vec<String>,
    #[prost(bytes = "vec", repeated, tag = "35")]
    pub r_data: Vec<Vec<u8>>,
    #[prost(message, repeated, tag = "36")]
    pub r_inner: Vec<Inner>,
    #[prost(int32, repeated, packed = "false", tag = "40")]
    pub u_i32: Vec<i32>,
    #[prost(sint64, repeated, packed = "false", tag = "41")]
    pub u_s64: Vec<i64>,
    #[prost(fixed32, repeated, packed = "false", tag = "42")]
    pub u_f32: Vec<u32>,
    #[prost(double, repeated, packed = "false", tag = "43")]
    pub u_db: Vec<f64>,
    #[prost(bool, repeated, packed = "false", tag = "44")]
    pub u_flag: Vec<bool>,
    #[prost(uint64, tag = "536870911")]
    pub big_number: u64,
}

/// The bundled schema, compiled once per test binary.
pub fn schemas() -> &'static SchemaSet {
    static SET: std::sync::LazyLock<SchemaSet> =
        std::sync::LazyLock::new(|| cornflakes_offload::bundled_schemas().expect("offload.proto compiles"));
    &SET
}

/// Writes prost-shaped values into an arena, by field name.
pub struct Builder<'s> {
    pub set: &'s SchemaSet,
    pub arena: Arena,
    /// Bytes fields of at least this length go into `pool` and are
    /// referenced as registered buffers (so the engine sends them
    /// zero-copy); shorter ones are copied into the arena's heap.
    pub register_from: usize,
    pub pool: Option<&'s Pool>,
    pub registered: Vec<RcBuf>,
}

impl<'s> Builder<'s> {
    pub fn new(set: &'s SchemaSet) -> Self {
        Self { set, arena: Arena::new(), register_from: usize::MAX, pool: None, registered: Vec::new() }
    }

    fn table(&self, name: &str) -> &'s MessageTable {
        self.set.table(self.set.id(name).unwrap())
    }

    fn put(&mut self, obj: ObjId, t: &MessageTable, field: &str, v: Slot) {
        assert!(self.arena.set(obj, t.field(field).unwrap().slot, v));
    }

    fn bytes(&mut self, data: &[u8]) -> Slot {
        match self.pool {
            Some(pool) if data.len() >= self.register_from => {
                let id = BufId(self.registered.len() as u32);
                // An offset inside the buffer, to test ranges.
                let mut padded = vec![0xEE; 3];
                padded.extend_from_slice(data);
                self.registered.push(pool.alloc_copy(&padded).unwrap());
                Slot::Registered { buf: id, off: 3, len: data.len() as u32 }
            }
            _ => self.arena.push_bytes(data).unwrap(),
        }
    }

    fn list(&mut self, items: Vec<Slot>) -> Slot {
        self.arena.push_list(&items).unwrap()
    }

    pub fn inner(&mut self, m: &Inner) -> ObjId {
        let t = self.table("offload.Inner");
        let obj = self.arena.alloc(t.slots).unwrap();
        self.put(obj, t, "id", Slot::from_i32(m.id));
        let s = self.bytes(m.name.as_bytes());
        self.put(obj, t, "name", s);
        let l = self.list(m.deltas.iter().map(|v| Slot::from_i64(*v)).collect());
        self.put(obj, t, "deltas", l);
        if let Some(c) = &m.child {
            let c = self.inner(c);
            self.put(obj, t, "child", Slot::Message(c));
        }
        obj
    }

    pub fn pair(&mut self, m: &Pair) -> ObjId {
        let t = self.table("offload.Pair");
        let obj = self.arena.alloc(t.slots).unwrap();
        let a = self.bytes(&m.a);
        self.put(obj, t, "a", a);
        let b = self.bytes(&m.b);
        self.put(obj, t, "b", b);
        obj
    }

    pub fn everything(&mut self, m: &Everything) -> ObjId {
        let t = self.table("offload.Everything");
        let obj = self.arena.alloc(t.slots).unwrap();
        let scalars = [
            ("i32", Slot::from_i32(m.i32)),
            ("i64", Slot::from_i64(m.i64)),
            ("u32", Slot::from_u32(m.u32)),
            ("u64", Slot::from_u64(m.u64)),
            ("s32", Slot::from_i32(m.s32)),
            ("s64", Slot::from_i64(m.s64)),
            ("f32", Slot::from_u32(m.f32)),
            ("f64", Slot::from_u64(m.f64)),
            ("sf32", Slot::from_i32(m.sf32)),
            ("sf64", Slot::from_i64(m.sf64)),
            ("fl", Slot::from_f32(m.fl)),
            ("db", Slot::from_f64(m.db)),
            ("flag", Slot::from_bool(m.flag)),
            ("color", Slot::from_i32(m.color)),
            ("big_number", Slot::from_u64(m.big_number)),
        ];
        for (name, v) in scalars {
            self.put(obj, t, name, v);
        }
        let s = self.bytes(m.text.as_bytes());
        self.put(obj, t, "text", s);
        let s = self.bytes(&m.data);
        self.put(obj, t, "data", s);
        if let Some(inner) = &m.inner {
            let c = self.inner(inner);
            self.put(obj, t, "inner", Slot::Message(c));
        }
        if let Some(v) = m.maybe {
            self.put(obj, t, "maybe", Slot::from_i32(v));
        }
        let lists: Vec<(&str, Vec<Slot>)> = vec![
            ("r_i32", m.r_i32.iter().map(|v| Slot::from_i32(*v)).collect()),
            ("r_i64", m.r_i64.iter().map(|v| Slot::from_i64(*v)).collect()),
            ("r_u32", m.r_u32.iter().map(|v| Slot::from_u32(*v)).collect()),
            ("r_u64", m.r_u64.iter().map(|v| Slot::from_u64(*v)).collect()),
            ("r_s32", m.r_s32.iter().map(|v| Slot::from_i32(*v)).collect()),
            ("r_s64", m.r_s64.iter().map(|v| Slot::from_i64(*v)).collect()),
            ("r_f32", m.r_f32.iter().map(|v| Slot::from_u32(*v)).collect()),
            ("r_f64", m.r_f64.iter().map(|v| Slot::from_u64(*v)).collect()),
            ("r_sf32", m.r_sf32.iter().map(|v| Slot::from_i32(*v)).collect()),
            ("r_sf64", m.r_sf64.iter().map(|v| Slot::from_i64(*v)).collect()),
            ("r_fl", m.r_fl.iter().map(|v| Slot::from_f32(*v)).collect()),
            ("r_db", m.r_db.iter().map(|v| Slot::from_f64(*v)).collect()),
            ("r_flag", m.r_flag.iter().map(|v| Slot::from_bool(*v)).collect()),
            ("r_color", m.r_color.iter().map(|v| Slot::from_i32(*v)).collect()),
            ("u_i32", m.u_i32.iter().map(|v| Slot::from_i32(*v)).collect()),
            ("u_s64", m.u_s64.iter().map(|v| Slot::from_i64(*v)).collect()),
            ("u_f32", m.u_f32.iter().map(|v| Slot::from_u32(*v)).collect()),
            ("u_db", m.u_db.iter().map(|v| Slot::from_f64(*v)).collect()),
            ("u_flag", m.u_flag.iter().map(|v| Slot::from_bool(*v)).collect()),
        ];
        for (name, items) in lists {
            let l = self.list(items);
            self.put(obj, t, name, l);
        }
        let texts: Vec<Slot> = m.r_text.iter().map(|s| self.bytes(s.as_bytes())).collect();
        let l = self.list(texts);
        self.put(obj, t, "r_text", l);
        let datas: Vec<Slot> = m.r_data.iter().map(|d| self.bytes(d)).collect();
        let l = self.list(datas);
        self.put(obj, t, "r_data", l);
        let inners: Vec<Slot> = m.r_inner.iter().map(|i| Slot::Message(self.inner(i))).collect();
        let l = self.list(inners);
        self.put(obj, t, "r_inner", l);
        obj
    }
}

/// Reads an arena object back into prost's type, by field name.
pub struct Reader<'s> {
    pub set: &'s SchemaSet,
    pub arena: &'s Arena,
}

impl Reader<'_> {
    fn slot(&self, obj: ObjId, t: &str, field: &str) -> Slot {
        let t = self.set.table(self.set.id(t).unwrap());
        self.arena.get(obj, t.field(field).unwrap().slot).unwrap()
    }
    fn scalar(&self, obj: ObjId, t: &str, field: &str) -> u64 {
        match self.slot(obj, t, field) {
            Slot::Empty => 0,
            s => s.scalar().expect("scalar slot"),
        }
    }
    fn bytes(&self, obj: ObjId, t: &str, field: &str) -> Vec<u8> {
        match self.slot(obj, t, field) {
            Slot::Empty => Vec::new(),
            s => self.arena.bytes(s).expect("bytes slot").to_vec(),
        }
    }
    fn items(&self, obj: ObjId, t: &str, field: &str) -> Vec<Slot> {
        match self.slot(obj, t, field) {
            Slot::Empty => Vec::new(),
            s => self.arena.list(s).expect("list slot").to_vec(),
        }
    }
    fn scalars(&self, obj: ObjId, t: &str, field: &str) -> Vec<u64> {
        self.items(obj, t, field).into_iter().map(|s| s.scalar().unwrap()).collect()
    }

    pub fn pair(&self, obj: ObjId) -> Pair {
        Pair { a: self.bytes(obj, "offload.Pair", "a"), b: self.bytes(obj, "offload.Pair", "b") }
    }

    pub fn inner(&self, obj: ObjId) -> Inner {
        const T: &str = "offload.Inner";
        Inner {
            id: self.scalar(obj, T, "id") as i32,
            name: String::from_utf8(self.bytes(obj, T, "name")).unwrap(),
            deltas: self.scalars(obj, T, "deltas").into_iter().map(|v| v as i64).collect(),
            child: match self.slot(obj, T, "child") {
                Slot::Message(c) => Some(Box::new(self.inner(c))),
                _ => None,
            },
        }
    }

    pub fn everything(&self, obj: ObjId) -> Everything {
        const T: &str = "offload.Everything";
        let s = |f| self.scalar(obj, T, f);
        let r = |f| self.scalars(obj, T, f);
        Everything {
            i32: s("i32") as i32,
            i64: s("i64") as i64,
            u32: s("u32") as u32,
            u64: s("u64"),
            s32: s("s32") as i32,
            s64: s("s64") as i64,
            f32: s("f32") as u32,
            f64: s("f64"),
            sf32: s("sf32") as i32,
            sf64: s("sf64") as i64,
            fl: f32::from_bits(s("fl") as u32),
            db: f64::from_bits(s("db")),
            flag: s("flag") != 0,
            color: s("color") as i32,
            text: String::from_utf8(self.bytes(obj, T, "text")).unwrap(),
            data: self.bytes(obj, T, "data"),
            inner: match self.slot(obj, T, "inner") {
                Slot::Message(c) => Some(self.inner(c)),
                _ => None,
            },
            maybe: self.slot(obj, T, "maybe").scalar().map(|v| v as i32),
            r_i32: r("r_i32").into_iter().map(|v| v as i32).collect(),
            r_i64: r("r_i64").into_iter().map(|v| v as i64).collect(),
            r_u32: r("r_u32").into_iter().map(|v| v as u32).collect(),
            r_u64: r("r_u64"),
            r_s32: r("r_s32").into_iter().map(|v| v as i32).collect(),
            r_s64: r("r_s64").into_iter().map(|v| v as i64).collect(),
            r_f32: r("r_f32").into_iter().map(|v| v as u32).collect(),
            r_f64: r("r_f64"),
            r_sf32: r("r_sf32").into_iter().map(|v| v as i32).collect(),
            r_sf64: r("r_sf64").into_iter().map(|v| v as i64).collect(),
            r_fl: r("r_fl").into_iter().map(|v| f32::from_bits(v as u32)).collect(),
            r_db: r("r_db").into_iter().map(f64::from_bits).collect(),
            r_flag: r("r_flag").into_iter().map(|v| v != 0).collect(),
            r_color: r("r_color").into_iter().map(|v| v as i32).collect(),
            r_text: self
                .items(obj, T, "r_text")
                .into_iter()
                .map(|s| String::from_utf8(self.arena.bytes(s).unwrap().to_vec()).unwrap())
                .collect(),
            r_data: self.items(obj, T, "r_data").into_iter().map(|s| self.arena.bytes(s).unwrap().to_vec()).collect(),
            r_inner: self
                .items(obj, T, "r_inner")
                .into_iter()
                .map(|s| match s {
                    Slot::Message(c) => self.inner(c),
                    other => panic!("not a message: {other:?}"),
                })
                .collect(),
            u_i32: r("u_i32").into_iter().map(|v| v as i32).collect(),
            u_s64: r("u_s64").into_iter().map(|v| v as i64).collect(),
            u_f32: r("u_f32").into_iter().map(|v| v as u32).collect(),
            u_db: r("u_db").into_iter().map(f64::from_bits).collect(),
            u_flag: r("u_flag").into_iter().map(|v| v != 0).collect(),
            big_number: s("big_number"),
        }
    }
}
