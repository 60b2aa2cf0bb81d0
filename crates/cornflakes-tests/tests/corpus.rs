//! The schema corpus (`proto/corpus`, ten files in the style of public
//! APIs: enums, oneofs, maps of every key type, nested packages, imports,
//! well-known types) round-trips every message in the three modes: only
//! copy, only scatter-gather, hybrid. Each message is filled by its
//! generated `__cf_sample` (every field set; bytes and strings from a pool
//! buffer, some above the 512-byte threshold; oneofs cycle through their
//! members with the depth), serialized both ways (one buffer; first segment
//! plus zero-copy segments), decoded from a pool packet, and compared.

use cornflakes::field::{ONLY_COPY, ONLY_ZERO_COPY};
use cornflakes::{Arena, Message, Pool};

include!(concat!(env!("OUT_DIR"), "/corpus/list.rs"));

mod corpus {
    pub use cornflakes_tests::corpus::*;
}

fn modes(pool: &Pool) -> [(&'static str, Arena); 3] {
    [
        ("only copy", Arena::with_threshold(Some(pool), ONLY_COPY)),
        ("only scatter-gather", Arena::with_threshold(Some(pool), ONLY_ZERO_COPY)),
        ("hybrid", Arena::new(pool)),
    ]
}

macro_rules! round_trip {
    ($t:ty) => {{
        let pool = Pool::new().unwrap();
        let text: Vec<u8> = (0..1200u32).map(|i| b'a' + (i % 26) as u8).collect();
        let blob = pool.alloc_copy(&text).unwrap();
        for (mode, arena) in modes(&pool) {
            for depth in 0..4 {
                let m = <$t>::__cf_sample(&arena, &blob, depth);
                let bytes = m.serialize_to_vec().unwrap();
                // The transmit form produces the same bytes.
                let layout = m.layout();
                let mut wire = vec![0u8; layout.first_segment_len()];
                m.write_header_and_copies(&layout, &mut wire).unwrap();
                m.for_each_zero_copy(|buf| wire.extend_from_slice(buf));
                assert_eq!(wire, bytes, "{} ({mode}, depth {depth}): segments", stringify!($t));

                let pkt = pool.alloc_copy(&bytes).unwrap();
                let decode_arena = Arena::with_threshold(Some(&pool), arena.threshold());
                let back = <$t>::deserialize(&pkt, &decode_arena).unwrap();
                assert_eq!(back, m, "{} ({mode}, depth {depth})", stringify!($t));
                // Clone is deep and equal; re-encoding gives the same length
                // (and at most the input length).
                let copy = back.clone();
                assert_eq!(copy, m);
                let again = copy.serialize_to_vec().unwrap();
                assert_eq!(again.len(), bytes.len(), "{} ({mode}): re-encoded length", stringify!($t));
                let back2 = <$t>::deserialize_from_slice(&again, &decode_arena).unwrap();
                assert_eq!(back2, m);
                // Debug does not panic.
                let _ = format!("{back:?}");
            }
        }
        1usize
    }};
}

#[test]
#[cfg_attr(miri, ignore)] // hundreds of messages: minutes under Miri
fn every_corpus_message_round_trips_in_every_mode() {
    let mut count = 0;
    macro_rules! one {
        ($t:ty) => {
            count += round_trip!($t);
        };
    }
    for_each_corpus_message!(one);
    assert!(count >= 40, "only {count} messages in the corpus");
}

/// A few messages under Miri, so that the generated oneof, map and enum
/// code runs there too.
#[test]
fn corpus_samples_round_trip_small() {
    let _ = round_trip!(corpus::acme::chat::Post<'_>);
    let _ = round_trip!(corpus::acme::maps::Inventory<'_>);
    let _ = round_trip!(corpus::acme::config::HttpServer<'_>);
}

/// Debug names enum values as prost's does (the number when the schema
/// does not know it), in fields and in oneof members, and shows an
/// `optional` field as `Some(..)` or `None`.
#[test]
fn debug_names_enum_values_and_shows_presence() {
    use corpus::acme::chat::{post, user, Post, User};
    use corpus::acme::maps::{Item, Tier};
    let arena = Arena::copying();
    let mut u = User::new_in(&arena);
    u.set_presence(user::Presence::Away);
    assert!(format!("{u:?}").contains("presence: Away,"), "{u:?}");
    u.set_presence_raw(42);
    assert!(format!("{u:?}").contains("presence: 42,"), "{u:?}");

    let mut p = Post::new_in(&arena);
    p.set_status_change(user::Presence::Online);
    assert!(format!("{p:?}").contains("content: Some(StatusChange(Online))"), "{p:?}");
    p.set_content(post::Content::StatusChange(-3));
    assert!(format!("{p:?}").contains("content: Some(StatusChange(-3))"), "{p:?}");
    // A message member is built with its constructor, as prost's variant.
    let mut a = corpus::acme::chat::Attachment::new_in(&arena);
    a.set_mime_type("text/plain");
    p.set_content(post::Content::attachment(a));
    assert!(format!("{p:?}").contains("content: Some(Attachment(Attachment { mime_type: \"text/plain\""), "{p:?}");
    assert!(
        matches!(p.get_content(), Some(post::Content::Attachment(a)) if a.get_mime_type().as_str() == Ok("text/plain"))
    );

    let mut item = Item::new_in(&arena);
    assert!(format!("{item:?}").ends_with("history: [], stock: None }"), "{item:?}");
    assert_eq!(item.get_stock_opt(), None);
    item.append_history(Tier::Gold);
    item.get_mut_history().append(9);
    item.set_stock(0);
    assert!(format!("{item:?}").ends_with("history: [Gold, 9], stock: Some(0) }"), "{item:?}");
    assert_eq!(item.get_stock_opt(), Some(0), "set to its default is still set");
    item.clear_stock();
    assert_eq!(item.get_stock_opt(), None);
    // Repeated enums read as enums, unknown values as the default.
    assert_eq!(item.iter_history().collect::<Vec<_>>(), [Tier::Gold, Tier::Unspecified]);
    assert!(Tier::is_valid(2) && !Tier::is_valid(9));
}

/// Map entries from values that do not outlive the message: copied in.
#[test]
fn maps_take_keys_and_values_that_do_not_outlive_the_message() {
    use corpus::acme::maps::Inventory;
    use corpus::acme::r#type::Money;
    let arena = Arena::copying();
    let mut inv = Inventory::new_in(&arena);
    for i in 0..3 {
        inv.insert_by_int32_copied(i, &format!("value {i}"));
        let mut m = Money::new_in(&arena);
        m.set_units(i64::from(i));
        inv.insert_prices_copied(&format!("sku-{i}"), m);
    }
    inv.insert_by_int32_copied(1, &String::from("replaced"));
    let bytes = inv.serialize_to_vec().unwrap();
    let back = Inventory::deserialize_from_slice(&bytes, &arena).unwrap();
    assert_eq!(back.get_by_int32().len(), 3, "a key inserted again replaces its value");
    assert_eq!(back.lookup_by_int32(1).unwrap().get_value().as_str(), Ok("replaced"));
    assert_eq!(back.lookup_prices("sku-2").and_then(|e| e.get_value()).map(|m| m.get_units()), Some(2));

    // Changed in place through the mutable lookup, then sent again.
    let mut back = back;
    back.lookup_prices_mut("sku-2").unwrap().get_mut_value().set_units(20);
    back.lookup_by_int32_mut(0).unwrap().set_value("zero");
    assert!(back.lookup_by_int32_mut(9).is_none());
    let bytes = back.serialize_to_vec().unwrap();
    let again = Inventory::deserialize_from_slice(&bytes, &arena).unwrap();
    assert_eq!(again.lookup_prices("sku-2").and_then(|e| e.get_value()).map(|m| m.get_units()), Some(20));
    assert_eq!(again.lookup_by_int32(0).unwrap().get_value().as_str(), Ok("zero"));
    assert_eq!(again.get_by_int32().len(), 3);
}
