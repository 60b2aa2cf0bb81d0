//! Schema evolution on the Cornflakes wire (docs/wire-format.md,
//! "Schema evolution"): `proto/evolution/v1.proto` and `v2.proto`, the same
//! `User` before and after deleting field 2 the protobuf way (its number
//! reserved) and adding field 6 above the others.

use cornflakes::{Arena, DecodeError, Message};
use cornflakes_tests::evolution::{v1, v2};

fn v1_user(arena: &Arena, email: &'static str) -> Vec<u8> {
    let mut u = v1::User::new_in(arena);
    u.set_id(7);
    u.set_legacy_email(email);
    u.set_name("Ann");
    u.set_age(30);
    u.serialize_to_vec().unwrap()
}

#[test]
fn a_message_without_the_deleted_field_reads_the_same_after_it_is_reserved() {
    let arena = Arena::copying();
    let bytes = v1_user(&arena, "");
    let u = v2::User::deserialize_from_slice(&bytes, &arena).unwrap();
    assert_eq!((u.get_id(), u.get_name().as_str().unwrap(), u.get_age()), (7, "Ann", 30));
    assert!(!u.get_verified());
}

#[test]
fn a_message_with_the_deleted_field_is_refused_not_misread() {
    let arena = Arena::copying();
    let bytes = v1_user(&arena, "old@example.com");
    let err = v2::User::deserialize_from_slice(&bytes, &arena).unwrap_err();
    assert_eq!(err, DecodeError::ReservedField(2));
    assert!(err.to_string().contains("field number 2, which this schema reserves"), "{err}");
}

#[test]
fn the_newer_schema_reads_back_in_the_older_one() {
    let arena = Arena::copying();
    let mut u = v2::User::new_in(&arena);
    u.set_id(9);
    u.set_name("Bo");
    u.set_age(41);
    u.set_verified(true);
    let bytes = u.serialize_to_vec().unwrap();
    let old = v1::User::deserialize_from_slice(&bytes, &arena).unwrap();
    assert_eq!((old.get_id(), old.get_name().as_str().unwrap(), old.get_age()), (9, "Bo", 41));
    assert!(!old.has_legacy_email());
    // The reserved number keeps its bit: both schemas' headers are one word
    // with the same bits for the fields they share.
    assert_eq!(
        &bytes[..8],
        &[1, 0, 0, 0, 0b0001_1101, 0, 0, 0],
        "ordinals 0 id, 1 (reserved 2), 2 name, 3 age, 4 verified"
    );
}
