//! The README's usage example, kept compiling and correct.

use cornflakes::{Arena, Message, Pool};
use cornflakes_tests::example as kv;

#[test]
fn readme_example() -> Result<(), Box<dyn std::error::Error>> {
    let pool = Pool::new()?;
    let value = pool.alloc_copy(&[7u8; 4096])?;
    let arena = Arena::new(&pool);

    let mut m = kv::GetM::new_in(&arena);
    m.set_id(1);
    m.append_keys("user:42");
    m.append_vals(&value);

    let layout = m.layout();
    let mut first = pool.alloc(layout.first_segment_len())?;
    m.write_header_and_copies(&layout, first.as_mut_slice().unwrap())?;
    let mut segments = Vec::new();
    m.for_each_zero_copy(|buf| segments.push(buf.clone()));
    assert_eq!(segments.len(), 1);
    assert_eq!(segments[0].as_ptr(), value.as_ptr(), "the value itself is the second segment");

    let pkt = pool.alloc_copy(&m.serialize_to_vec().unwrap())?;
    let back = kv::GetM::deserialize(&pkt, &arena)?;
    assert_eq!(back.get_keys()[0].as_str()?, "user:42");
    assert!(back.get_vals()[0].is_zero_copy());
    Ok(())
}
