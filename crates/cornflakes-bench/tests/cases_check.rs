//! Every case passes its check (output decodes to the input, timed decode
//! reads the input's checksum) and survives repeated operations.

use cornflakes_bench::{run_op, with_case, Case, Op, Shape, System, WithCase};

struct Repeat;

impl WithCase for Repeat {
    type Output = ();
    fn run<C: Case>(self, case: &mut C) {
        for op in Op::ALL {
            for _ in 0..100 {
                run_op(case, op);
            }
        }
    }
}

#[test]
fn every_case_checks_and_repeats() {
    for system in System::ALL {
        for shape in Shape::ALL {
            with_case(system, shape, Repeat);
        }
    }
}

#[test]
fn cornflakes_sends_large_fields_by_reference() {
    struct Segments;
    impl WithCase for Segments {
        type Output = Vec<usize>;
        fn run<C: Case>(self, case: &mut C) -> Vec<usize> {
            case.wire().iter().map(Vec::len).collect()
        }
    }
    // The header and copies, then one segment per field of >= 512 bytes.
    assert_eq!(with_case(System::Cornflakes, Shape::B1x4096, Segments)[1..], [4096]);
    assert_eq!(with_case(System::Cornflakes, Shape::C4x1024, Segments)[1..], [1024; 4]);
    for small in [Shape::A1x64, Shape::D16x256, Shape::E8x32, Shape::FNested] {
        assert_eq!(with_case(System::Cornflakes, small, Segments).len(), 1, "{small:?}");
    }
}

#[test]
fn cornflakes_protobuf_sends_prosts_bytes_with_large_fields_by_reference() {
    struct Wire;
    impl WithCase for Wire {
        type Output = Vec<Vec<u8>>;
        fn run<C: Case>(self, case: &mut C) -> Vec<Vec<u8>> {
            case.wire()
        }
    }
    // Standard proto3: the same bytes as prost's encoding.
    for shape in Shape::ALL {
        let ours = with_case(System::CornflakesProtobuf, shape, Wire);
        let prost = with_case(System::Prost, shape, Wire);
        assert_eq!(ours.concat(), prost.concat(), "{shape:?}");
    }
    let lens = |shape| with_case(System::CornflakesProtobuf, shape, Wire).iter().map(Vec::len).collect::<Vec<_>>();
    // Key and 2-byte length copied, then the payload by reference.
    assert_eq!(lens(Shape::B1x4096), [3, 4096]);
    assert_eq!(lens(Shape::C4x1024), [3, 1024, 3, 1024, 3, 1024, 3, 1024]);
    for small in [Shape::A1x64, Shape::D16x256, Shape::E8x32, Shape::FNested] {
        assert_eq!(lens(small).len(), 1, "{small:?}");
    }
}
