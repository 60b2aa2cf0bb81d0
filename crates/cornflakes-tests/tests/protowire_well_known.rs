//! Google's well-known types on the protobuf wire: a `Wire::Protobuf`
//! schema's Timestamp, Duration and Any fields are byte for byte what
//! prost encodes with prost-types, and an `Any` packed on either side
//! unpacks on the other.

use cornflakes::protowire::ProtoMessage;
use cornflakes::well_known::protowire::{Any, Duration, Timestamp};
use cornflakes::Arena;
use cornflakes_tests::events::Event;
use prost::Message as _;

/// What prost-build generates for `events.Event`.
#[derive(Clone, PartialEq, prost::Message)]
struct PbEvent {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    at: Option<prost_types::Timestamp>,
    #[prost(message, optional, tag = "3")]
    took: Option<prost_types::Duration>,
    #[prost(message, optional, tag = "4")]
    detail: Option<prost_types::Any>,
}

#[test]
fn well_known_fields_encode_as_prost_types_do_and_any_crosses_both_ways() {
    let arena = Arena::copying();
    let when = std::time::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 250_000_000);
    let mut inner = Timestamp::new_in(&arena);
    inner.set_seconds(42);
    let mut e = Event::new_in(&arena);
    e.set_name("deploy");
    e.set_at(Timestamp::from_system_time(when, &arena));
    e.set_took(Duration::from_std(std::time::Duration::from_millis(1500), &arena));
    e.set_detail(Any::from_msg(&inner, &arena));
    assert_eq!(e.get_at().map(|t| t.to_string()), Some("2023-11-14T22:13:20.250Z".to_owned()));

    let theirs = PbEvent {
        name: "deploy".into(),
        at: Some(prost_types::Timestamp::from(when)),
        took: Some(prost_types::Duration { seconds: 1, nanos: 500_000_000 }),
        detail: Some(prost_types::Any::from_msg(&prost_types::Timestamp { seconds: 42, nanos: 0 }).unwrap()),
    };
    let ours = e.serialize_proto_to_vec();
    assert_eq!(ours, theirs.encode_to_vec(), "byte for byte what prost writes");

    // prost unpacks our Any; we unpack prost's.
    let decoded = PbEvent::decode(&ours[..]).unwrap();
    let ts: prost_types::Timestamp = decoded.detail.unwrap().to_msg().unwrap();
    assert_eq!(ts.seconds, 42);
    let back = Event::deserialize_proto_from_slice(&ours, &arena).unwrap();
    let detail = back.get_detail().unwrap();
    assert_eq!(detail.to_msg::<Timestamp<'_>>(&arena).unwrap().get_seconds(), 42);
    assert!(detail.to_msg::<Duration<'_>>(&arena).is_err(), "another type");
    assert_eq!(back.get_took().and_then(|d| d.to_std()), Some(std::time::Duration::from_millis(1500)));
}
