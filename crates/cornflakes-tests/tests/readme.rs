//! The README's usage example, extracted from README.md by build.rs and run
//! as written, so it cannot drift from the code.

include!(concat!(env!("OUT_DIR"), "/readme_example.rs"));

#[test]
fn readme_example_runs() {
    readme_example().expect("the README example succeeds");
}

/// What the README's comments claim, checked: the small key is copied, the
/// pinned 4 KiB value is the second segment itself, and decoding keeps it
/// zero-copy.
#[test]
fn readme_claims_hold() -> Result<(), Box<dyn std::error::Error>> {
    use cornflakes::{Arena, Message, Pool};
    use cornflakes_tests::example as kv;

    let pool = Pool::new()?;
    let value = pool.alloc_copy(&[7u8; 4096])?;
    let arena = Arena::new(&pool);
    let mut m = kv::GetM::new_in(&arena);
    m.set_id(1);
    m.append_keys("user:42");
    m.append_vals(&value);

    let layout = m.layout();
    assert_eq!(layout.zero_copy_entries, 1);
    let mut first = pool.alloc(layout.first_segment_len())?;
    m.write_header_and_copies(&layout, &mut first)?;
    let mut segments = Vec::new();
    m.for_each_zero_copy(|buf| segments.push(buf.clone()));
    assert_eq!(segments.len(), 1);
    assert_eq!(segments[0].as_ptr(), value.as_ptr(), "the value itself is the second segment");

    let pkt = pool.alloc_copy(&m.serialize_to_vec()?)?;
    assert_eq!(&pkt[..first.len()], &first[..], "the first segment is the start of the message");
    let back = kv::GetM::deserialize(&pkt, &arena)?;
    assert_eq!(back.get_keys()[0].as_str()?, "user:42");
    assert!(back.get_vals()[0].is_zero_copy());
    Ok(())
}
