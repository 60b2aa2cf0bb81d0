//! A message written by hand exactly as `cornflakes-build` should generate
//! it, to test the runtime without the generator. Schema:
//!
//! ```proto
//! syntax = "proto3";
//! package example;
//! message Inner { uint32 a = 1; bytes data = 2; }
//! message GetM {
//!   uint32 id = 1;
//!   string key = 2;
//!   repeated bytes vals = 3;
//!   Inner inner = 4;
//!   repeated Inner inners = 5;
//!   repeated uint64 nums = 6;
//!   bool flag = 7;
//!   double score = 40;
//! }
//! ```

#[allow(dead_code)]
pub mod example {
    #[derive(Debug, PartialEq)]
    pub struct Inner<'a> {
        arena: ::cornflakes::__private::ArenaRef<'a>,
        bitmap: [u32; 1],
        a: u32,
        data: ::cornflakes::CfBytes<'a>,
    }

    impl<'a> Inner<'a> {
        pub fn new_in(arena: &'a ::cornflakes::Arena) -> Self {
            <Self as ::cornflakes::Message<'a>>::new_in(arena)
        }
        pub fn has_a(&self) -> bool {
            ::cornflakes::__private::bit(&self.bitmap, 0)
        }
        pub fn get_a(&self) -> u32 {
            self.a
        }
        pub fn set_a(&mut self, value: u32) {
            self.a = value;
            ::cornflakes::__private::set_bit(&mut self.bitmap, 0);
        }
        pub fn clear_a(&mut self) {
            self.a = Default::default();
            ::cornflakes::__private::clear_bit(&mut self.bitmap, 0);
        }
        pub fn has_data(&self) -> bool {
            ::cornflakes::__private::bit(&self.bitmap, 1)
        }
        pub fn get_data(&self) -> &::cornflakes::CfBytes<'a> {
            &self.data
        }
        pub fn set_data(&mut self, value: &'a [u8]) {
            self.data = ::cornflakes::CfBytes::new(value, self.arena.get());
            ::cornflakes::__private::set_bit(&mut self.bitmap, 1);
        }
        pub fn set_data_copied(&mut self, value: &[u8]) {
            self.data = ::cornflakes::CfBytes::copy_in(value, self.arena.get());
            ::cornflakes::__private::set_bit(&mut self.bitmap, 1);
        }
        pub fn set_data_field(&mut self, value: ::cornflakes::CfBytes<'a>) {
            self.data = value;
            ::cornflakes::__private::set_bit(&mut self.bitmap, 1);
        }
        pub fn clear_data(&mut self) {
            self.data = Default::default();
            ::cornflakes::__private::clear_bit(&mut self.bitmap, 1);
        }
    }

    impl<'a> ::cornflakes::Message<'a> for Inner<'a> {
        const FIELD_COUNT: usize = 2;

        fn new_in(arena: &'a ::cornflakes::Arena) -> Self {
            Self {
                arena: ::cornflakes::__private::ArenaRef::new(arena),
                bitmap: [0; 1],
                a: Default::default(),
                data: Default::default(),
            }
        }

        fn arena(&self) -> &'a ::cornflakes::Arena {
            self.arena.get()
        }
    }

    impl<'a> ::cornflakes::__private::MessageImpl<'a> for Inner<'a> {
        fn header_len(&self) -> usize {
            let mut len = ::cornflakes::__private::header_prefix_len(1);
            if self.has_a() {
                len += <u32 as ::cornflakes::__private::Field>::ENTRY_LEN;
            }
            if self.has_data() {
                len += <::cornflakes::CfBytes as ::cornflakes::__private::Field>::ENTRY_LEN;
            }
            len
        }

        fn add_children_layout(&self, layout: &mut ::cornflakes::Layout) {
            if self.has_data() {
                ::cornflakes::__private::Field::add_layout(&self.data, layout);
            }
        }

        fn write_object(&self, w: &mut ::cornflakes::__private::Writer<'_>, at: usize) {
            let mut pos = w.put_bitmap(at, &self.bitmap);
            if self.has_a() {
                ::cornflakes::__private::Field::write_entry(&self.a, w, pos);
                pos += <u32 as ::cornflakes::__private::Field>::ENTRY_LEN;
            }
            if self.has_data() {
                ::cornflakes::__private::Field::write_entry(&self.data, w, pos);
                pos += <::cornflakes::CfBytes as ::cornflakes::__private::Field>::ENTRY_LEN;
            }
            let _ = pos;
        }

        fn visit_zero_copy<F: FnMut(&::cornflakes::RcBuf)>(&self, f: &mut F) {
            if self.has_data() {
                ::cornflakes::__private::Field::visit_zero_copy(&self.data, f);
            }
        }

        fn read_object(
            r: &mut ::cornflakes::__private::Reader<'a>,
            at: usize,
        ) -> Result<Self, ::cornflakes::DecodeError> {
            let mut m = Self::new_in(r.arena());
            let start = r.enter_object(at, &mut m.bitmap, 2)?;
            let mut pos = start;
            if m.has_a() {
                m.a = ::cornflakes::__private::Field::read_entry(r, pos)?;
                pos += <u32 as ::cornflakes::__private::Field>::ENTRY_LEN;
            }
            if m.has_data() {
                m.data = ::cornflakes::__private::Field::read_entry(r, pos)?;
                pos += <::cornflakes::CfBytes as ::cornflakes::__private::Field>::ENTRY_LEN;
            }
            r.leave_object(start, pos)?;
            Ok(m)
        }
    }
}
