//! Property test against prost: for the same logical values of
//! `acme.payments.Charge` (a string, a nested message from another package,
//! an open enum given any `i32`, a oneof of two messages and a string, a
//! nested enum, a well-known `Timestamp`, a `map<string, string>`, an
//! `optional` string, a `uint64` at field 100000), what Cornflakes decodes
//! equals what prost decodes; the same for `acme.maps.Inventory`, a map of
//! every legal key type with scalar, bytes, string, enum and message values.
//! The prost types below are what prost-build generates for the schema
//! (written out, since there is no protoc here).

use std::collections::HashMap;

use cornflakes::{Arena, Message, Pool};
use cornflakes_tests::corpus::acme::{maps, payments, r#type};
use proptest::prelude::*;

mod pb {
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Item {
        #[prost(string, tag = "1")]
        pub sku: String,
        #[prost(message, optional, tag = "2")]
        pub price: Option<Money>,
        #[prost(enumeration = "super::maps::Tier", tag = "3")]
        pub tier: i32,
        #[prost(enumeration = "super::maps::Tier", repeated, tag = "4")]
        pub history: Vec<i32>,
        #[prost(uint32, optional, tag = "5")]
        pub stock: Option<u32>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Inventory {
        #[prost(map = "int32, string", tag = "1")]
        pub by_int32: ::std::collections::HashMap<i32, String>,
        #[prost(map = "int64, bytes", tag = "2")]
        pub by_int64: ::std::collections::HashMap<i64, Vec<u8>>,
        #[prost(map = "uint32, uint64", tag = "3")]
        pub by_uint32: ::std::collections::HashMap<u32, u64>,
        #[prost(map = "uint64, bool", tag = "4")]
        pub by_uint64: ::std::collections::HashMap<u64, bool>,
        #[prost(map = "sint32, float", tag = "5")]
        pub by_sint32: ::std::collections::HashMap<i32, f32>,
        #[prost(map = "sint64, double", tag = "6")]
        pub by_sint64: ::std::collections::HashMap<i64, f64>,
        #[prost(map = "fixed32, int32", tag = "7")]
        pub by_fixed32: ::std::collections::HashMap<u32, i32>,
        #[prost(map = "fixed64, int64", tag = "8")]
        pub by_fixed64: ::std::collections::HashMap<u64, i64>,
        #[prost(map = "sfixed32, uint32", tag = "9")]
        pub by_sfixed32: ::std::collections::HashMap<i32, u32>,
        #[prost(map = "sfixed64, enumeration(super::maps::Tier)", tag = "10")]
        pub by_sfixed64: ::std::collections::HashMap<i64, i32>,
        #[prost(map = "bool, string", tag = "11")]
        pub by_bool: ::std::collections::HashMap<bool, String>,
        #[prost(map = "string, message", tag = "12")]
        pub prices: ::std::collections::HashMap<String, Money>,
        #[prost(map = "string, message", tag = "13")]
        pub items: ::std::collections::HashMap<String, Item>,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Money {
        #[prost(string, tag = "1")]
        pub currency_code: String,
        #[prost(int64, tag = "2")]
        pub units: i64,
        #[prost(int32, tag = "3")]
        pub nanos: i32,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Card {
        #[prost(string, tag = "1")]
        pub last4: String,
        #[prost(uint32, tag = "2")]
        pub exp_month: u32,
        #[prost(uint32, tag = "3")]
        pub exp_year: u32,
        #[prost(string, tag = "4")]
        pub network: String,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct BankAccount {
        #[prost(string, tag = "1")]
        pub iban: String,
        #[prost(string, tag = "2")]
        pub bic: String,
    }
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Method {
        #[prost(message, tag = "10")]
        Card(Card),
        #[prost(message, tag = "11")]
        Bank(BankAccount),
        #[prost(string, tag = "12")]
        WalletToken(String),
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Charge {
        #[prost(string, tag = "1")]
        pub id: String,
        #[prost(message, optional, tag = "2")]
        pub amount: Option<Money>,
        #[prost(int32, tag = "3")]
        pub currency: i32,
        #[prost(oneof = "Method", tags = "10, 11, 12")]
        pub method: Option<Method>,
        #[prost(int32, tag = "20")]
        pub state: i32,
        #[prost(message, optional, tag = "21")]
        pub created: Option<::prost_types::Timestamp>,
        #[prost(map = "string, string", tag = "22")]
        pub metadata: ::std::collections::HashMap<String, String>,
        #[prost(string, optional, tag = "500")]
        pub failure_reason: Option<String>,
        #[prost(uint64, tag = "100000")]
        pub idempotency: u64,
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["\\PC{0,8}", "[a-z]{500,600}"]
}

fn money() -> impl Strategy<Value = pb::Money> {
    (text(), any::<i64>(), any::<i32>()).prop_map(|(currency_code, units, nanos)| pb::Money {
        currency_code,
        units,
        nanos,
    })
}

fn method() -> impl Strategy<Value = pb::Method> {
    prop_oneof![
        (text(), any::<u32>(), any::<u32>(), text()).prop_map(
            |(last4, exp_month, exp_year, network)| pb::Method::Card(pb::Card { last4, exp_month, exp_year, network })
        ),
        (text(), text()).prop_map(|(iban, bic)| pb::Method::Bank(pb::BankAccount { iban, bic })),
        text().prop_map(pb::Method::WalletToken),
    ]
}

fn charge() -> impl Strategy<Value = pb::Charge> {
    (
        text(),
        proptest::option::of(money()),
        prop_oneof![Just(0), Just(1), Just(2), Just(-1), any::<i32>()],
        proptest::option::of(method()),
        prop_oneof![0..4i32, any::<i32>()],
        proptest::option::of((any::<i64>(), any::<i32>())),
        proptest::collection::hash_map(text(), text(), 0..4),
        proptest::option::of(text()),
        any::<u64>(),
    )
        .prop_map(|(id, amount, currency, method, state, created, metadata, failure_reason, idempotency)| {
            pb::Charge {
                id,
                amount,
                currency,
                method,
                state,
                created: created.map(|(seconds, nanos)| ::prost_types::Timestamp { seconds, nanos }),
                metadata,
                failure_reason,
                idempotency,
            }
        })
}

/// Builds the Cornflakes message for the same logical value.
fn build<'a>(c: &'a pb::Charge, arena: &'a Arena) -> payments::Charge<'a> {
    let mut m = payments::Charge::new_in(arena);
    m.set_id(&c.id);
    if let Some(a) = &c.amount {
        let money = m.get_mut_amount();
        money.set_currency_code(&a.currency_code);
        money.set_units(a.units);
        money.set_nanos(a.nanos);
    }
    m.set_currency_raw(c.currency);
    match &c.method {
        Some(pb::Method::Card(card)) => {
            let mut x = payments::Card::new_in(arena);
            x.set_last4(&card.last4);
            x.set_exp_month(card.exp_month);
            x.set_exp_year(card.exp_year);
            x.set_network(&card.network);
            m.set_card(x);
        }
        Some(pb::Method::Bank(bank)) => {
            let mut x = payments::BankAccount::new_in(arena);
            x.set_iban(&bank.iban);
            x.set_bic(&bank.bic);
            m.set_bank(x);
        }
        Some(pb::Method::WalletToken(t)) => m.set_wallet_token(t),
        None => {}
    }
    m.set_state_raw(c.state);
    if let Some(t) = &c.created {
        let ts = m.get_mut_created();
        ts.set_seconds(t.seconds);
        ts.set_nanos(t.nanos);
    }
    for (k, v) in &c.metadata {
        m.insert_metadata(k, v);
    }
    if let Some(r) = &c.failure_reason {
        m.set_failure_reason(r);
    }
    m.set_idempotency(c.idempotency);
    m
}

fn string(s: &cornflakes::CfString<'_>) -> String {
    s.as_str().expect("UTF-8").to_owned()
}

/// Reads a decoded Cornflakes message back into prost's types.
fn to_prost(m: &payments::Charge<'_>) -> pb::Charge {
    let money = |x: &r#type::Money<'_>| pb::Money {
        currency_code: string(x.get_currency_code()),
        units: x.get_units(),
        nanos: x.get_nanos(),
    };
    let method = m.get_method().map(|method| match method {
        payments::charge::Method::Card(card) => pb::Method::Card(pb::Card {
            last4: string(card.get_last4()),
            exp_month: card.get_exp_month(),
            exp_year: card.get_exp_year(),
            network: string(card.get_network()),
        }),
        payments::charge::Method::Bank(bank) => {
            pb::Method::Bank(pb::BankAccount { iban: string(bank.get_iban()), bic: string(bank.get_bic()) })
        }
        payments::charge::Method::WalletToken(t) => pb::Method::WalletToken(string(t)),
    });
    let metadata: HashMap<String, String> =
        m.get_metadata().iter().map(|e| (string(e.get_key()), string(e.get_value()))).collect();
    pb::Charge {
        id: string(m.get_id()),
        amount: m.get_amount().map(money),
        currency: m.get_currency_raw(),
        method,
        state: m.get_state_raw(),
        created: m.get_created().map(|t| ::prost_types::Timestamp { seconds: t.get_seconds(), nanos: t.get_nanos() }),
        metadata,
        failure_reason: m.has_failure_reason().then(|| string(m.get_failure_reason())),
        idempotency: m.get_idempotency(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    #[cfg_attr(miri, ignore)] // value equivalence, not memory safety: minutes per case under Miri
    fn decoded_values_equal_prosts(c in charge()) {
        use prost::Message as _;
        // What prost decodes from its own encoding of the value.
        let via_prost = pb::Charge::decode(&c.encode_to_vec()[..]).unwrap();

        let pool = Pool::new().unwrap();
        let arena = Arena::new(&pool);
        let m = build(&c, &arena);
        let pkt = pool.alloc_copy(&m.serialize_to_vec().unwrap()).unwrap();
        let decode_arena = Arena::new(&pool);
        let back = payments::Charge::deserialize(&pkt, &decode_arena).unwrap();
        prop_assert_eq!(to_prost(&back), via_prost);
        // Enums are open: an unknown value reads as the default through the
        // typed getter, as prost's getter does, and survives as i32.
        prop_assert_eq!(back.get_currency() as i32, payments::Currency::try_from(c.currency).map_or(0, |v| v as i32));
        // proto3 presence agrees with prost's encoding: a default field is
        // absent in both.
        prop_assert_eq!(back.has_id(), !c.id.is_empty());
        prop_assert_eq!(back.has_currency(), c.currency != 0);
    }
}

fn small<K: std::hash::Hash + Eq + std::fmt::Debug, V: std::fmt::Debug>(
    k: impl Strategy<Value = K>,
    v: impl Strategy<Value = V>,
) -> impl Strategy<Value = HashMap<K, V>> {
    proptest::collection::hash_map(k, v, 0..3)
}

fn item() -> impl Strategy<Value = pb::Item> {
    (text(), proptest::option::of(money()), 0..3i32, proptest::collection::vec(0..3i32, 0..3), any::<Option<u32>>())
        .prop_map(|(sku, price, tier, history, stock)| pb::Item { sku, price, tier, history, stock })
}

fn inventory() -> impl Strategy<Value = pb::Inventory> {
    (
        (
            small(any::<i32>(), text()),
            small(any::<i64>(), text().prop_map(String::into_bytes)),
            small(any::<u32>(), any::<u64>()),
            small(any::<u64>(), any::<bool>()),
            small(any::<i32>(), -1e6f32..1e6),
            small(any::<i64>(), -1e12f64..1e12),
            small(any::<u32>(), any::<i32>()),
        ),
        (
            small(any::<u64>(), any::<i64>()),
            small(any::<i32>(), any::<u32>()),
            small(any::<i64>(), 0..3i32),
            small(any::<bool>(), text()),
            small(text(), money()),
            small(text(), item()),
        ),
    )
        .prop_map(|((a, b, c, d, e, f, g), (h, i, j, k, l, m))| pb::Inventory {
            by_int32: a,
            by_int64: b,
            by_uint32: c,
            by_uint64: d,
            by_sint32: e,
            by_sint64: f,
            by_fixed32: g,
            by_fixed64: h,
            by_sfixed32: i,
            by_sfixed64: j,
            by_bool: k,
            prices: l,
            items: m,
        })
}

fn build_money<'a>(x: &'a pb::Money, arena: &'a Arena) -> r#type::Money<'a> {
    let mut money = r#type::Money::new_in(arena);
    money.set_currency_code(&x.currency_code);
    money.set_units(x.units);
    money.set_nanos(x.nanos);
    money
}

fn read_money(x: &r#type::Money<'_>) -> pb::Money {
    pb::Money { currency_code: string(x.get_currency_code()), units: x.get_units(), nanos: x.get_nanos() }
}

fn build_inventory<'a>(v: &'a pb::Inventory, arena: &'a Arena) -> maps::Inventory<'a> {
    let mut m = maps::Inventory::new_in(arena);
    v.by_int32.iter().for_each(|(k, x)| m.insert_by_int32(*k, x));
    v.by_int64.iter().for_each(|(k, x)| m.insert_by_int64(*k, x));
    v.by_uint32.iter().for_each(|(k, x)| m.insert_by_uint32(*k, *x));
    v.by_uint64.iter().for_each(|(k, x)| m.insert_by_uint64(*k, *x));
    v.by_sint32.iter().for_each(|(k, x)| m.insert_by_sint32(*k, *x));
    v.by_sint64.iter().for_each(|(k, x)| m.insert_by_sint64(*k, *x));
    v.by_fixed32.iter().for_each(|(k, x)| m.insert_by_fixed32(*k, *x));
    v.by_fixed64.iter().for_each(|(k, x)| m.insert_by_fixed64(*k, *x));
    v.by_sfixed32.iter().for_each(|(k, x)| m.insert_by_sfixed32(*k, *x));
    v.by_sfixed64.iter().for_each(|(k, x)| m.insert_by_sfixed64(*k, maps::Tier::try_from(*x).unwrap()));
    v.by_bool.iter().for_each(|(k, x)| m.insert_by_bool(*k, x));
    v.prices.iter().for_each(|(k, x)| m.insert_prices(k, build_money(x, arena)));
    for (k, x) in &v.items {
        let mut item = maps::Item::new_in(arena);
        item.set_sku(&x.sku);
        if let Some(p) = &x.price {
            item.set_price(build_money(p, arena));
        }
        item.set_tier_raw(x.tier);
        x.history.iter().for_each(|t| item.append_history(maps::Tier::try_from(*t).unwrap()));
        if let Some(s) = x.stock {
            item.set_stock(s);
        }
        m.insert_items(k, item);
    }
    m
}

fn read_inventory(m: &maps::Inventory<'_>) -> pb::Inventory {
    macro_rules! map {
        ($get:ident, |$e:ident| $k:expr, $v:expr) => {
            m.$get().iter().map(|$e| ($k, $v)).collect()
        };
    }
    pb::Inventory {
        by_int32: map!(get_by_int32, |e| e.get_key(), string(e.get_value())),
        by_int64: map!(get_by_int64, |e| e.get_key(), e.get_value().to_vec()),
        by_uint32: map!(get_by_uint32, |e| e.get_key(), e.get_value()),
        by_uint64: map!(get_by_uint64, |e| e.get_key(), e.get_value()),
        by_sint32: map!(get_by_sint32, |e| e.get_key(), e.get_value()),
        by_sint64: map!(get_by_sint64, |e| e.get_key(), e.get_value()),
        by_fixed32: map!(get_by_fixed32, |e| e.get_key(), e.get_value()),
        by_fixed64: map!(get_by_fixed64, |e| e.get_key(), e.get_value()),
        by_sfixed32: map!(get_by_sfixed32, |e| e.get_key(), e.get_value()),
        by_sfixed64: map!(get_by_sfixed64, |e| e.get_key(), e.get_value_raw()),
        by_bool: map!(get_by_bool, |e| e.get_key(), string(e.get_value())),
        // A message value that is absent reads as its default, as in prost.
        prices: map!(get_prices, |e| string(e.get_key()), e.get_value().map(read_money).unwrap_or_default()),
        items: map!(
            get_items,
            |e| string(e.get_key()),
            e.get_value()
                .map(|x| pb::Item {
                    sku: string(x.get_sku()),
                    price: x.get_price().map(read_money),
                    tier: x.get_tier_raw(),
                    history: x.get_history().to_vec(),
                    stock: x.has_stock().then(|| x.get_stock()),
                })
                .unwrap_or_default()
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    #[cfg_attr(miri, ignore)] // as above
    fn decoded_maps_equal_prosts(v in inventory()) {
        use prost::Message as _;
        let via_prost = pb::Inventory::decode(&v.encode_to_vec()[..]).unwrap();
        let pool = Pool::new().unwrap();
        let arena = Arena::new(&pool);
        let m = build_inventory(&v, &arena);
        let pkt = pool.alloc_copy(&m.serialize_to_vec().unwrap()).unwrap();
        let decode_arena = Arena::new(&pool);
        let back = maps::Inventory::deserialize(&pkt, &decode_arena).unwrap();
        prop_assert_eq!(read_inventory(&back), via_prost);
        // Lookup finds every key.
        for k in v.by_int32.keys() {
            prop_assert!(back.lookup_by_int32(*k).is_some());
        }
        for k in v.items.keys() {
            prop_assert!(back.lookup_items(k).is_some());
        }
    }
}

/// Items whose `Debug` can be compared with prost's: short strings (ours
/// prints a string over 64 bytes by its length), enum values the schema
/// knows and some it does not.
fn printable_item() -> impl Strategy<Value = pb::Item> {
    let short = || "\\PC{0,8}";
    let money = (short(), any::<i64>(), any::<i32>()).prop_map(|(currency_code, units, nanos)| pb::Money {
        currency_code,
        units,
        nanos,
    });
    (short(), proptest::option::of(money), -1..4i32, proptest::collection::vec(-1..4i32, 0..4), any::<Option<u32>>())
        .prop_map(|(sku, price, tier, history, stock)| pb::Item { sku, price, tier, history, stock })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 256 }, ..ProptestConfig::default() })]

    /// A decoded message prints as prost's derive prints the same values:
    /// enums by name (numbers the schema does not know as numbers), lists as
    /// lists, `optional` and message fields as `Some(..)` / `None`.
    #[test]
    fn debug_prints_what_prost_prints(x in printable_item()) {
        let arena = Arena::copying();
        let mut item = maps::Item::new_in(&arena);
        item.set_sku(&x.sku);
        if let Some(p) = &x.price {
            item.set_price(build_money(p, &arena));
        }
        item.set_tier_raw(x.tier);
        x.history.iter().for_each(|t| item.get_mut_history().append(*t));
        if let Some(s) = x.stock {
            item.set_stock(s);
        }
        let bytes = item.serialize_to_vec().unwrap();
        let decode_arena = Arena::copying();
        let back = maps::Item::deserialize_from_slice(&bytes, &decode_arena).unwrap();
        prop_assert_eq!(format!("{back:?}"), format!("{x:?}"));
        prop_assert_eq!(back.get_stock_opt(), x.stock);
        prop_assert_eq!(back.encoded_len(), bytes.len());
    }
}

/// Maps print as prost's `HashMap`s print (one entry each, so that the
/// order is not the hash map's): `{key: value}`, enum values by name, a
/// message value as the message.
#[test]
fn debug_of_maps_prints_what_prost_prints() {
    let item = pb::Item { sku: "s".into(), price: None, tier: 7, history: vec![1, 2], stock: Some(4) };
    let money = pb::Money { currency_code: "EUR".into(), units: 3, nanos: 0 };
    let v = pb::Inventory {
        by_int32: [(1, "a".to_owned())].into(),
        by_uint64: [(7, true)].into(),
        by_sint32: [(-2, 1.5)].into(),
        by_sfixed64: [(3, 1), (4, 99)].into_iter().take(1).collect(),
        by_bool: [(true, "t".to_owned())].into(),
        prices: [("p".to_owned(), money)].into(),
        items: [("i".to_owned(), item)].into(),
        ..Default::default()
    };
    let pool = Pool::new().unwrap();
    let arena = Arena::new(&pool);
    let ours = build_inventory(&v, &arena);
    assert_eq!(format!("{ours:?}"), format!("{v:?}"));
}

/// The well-known types' names and type URLs are prost-types', and an
/// `Any` packed by either side names its message the same way.
#[test]
fn names_and_type_urls_are_what_prost_types_gives() {
    use cornflakes::{well_known as wk, Name};
    macro_rules! same {
        ($($t:ident),*) => {$(
            assert_eq!(<wk::$t<'_> as Name>::full_name(), <prost_types::$t as prost::Name>::full_name());
            assert_eq!(<wk::$t<'_> as Name>::type_url(), <prost_types::$t as prost::Name>::type_url());
        )*};
    }
    // The three prost-types gives a name.
    same!(Any, Duration, Timestamp);
    assert_eq!(<wk::Struct<'_> as Name>::type_url(), "type.googleapis.com/google.protobuf.Struct");
    assert_eq!(<payments::Charge<'_> as Name>::full_name(), "acme.payments.Charge");

    // prost packs a Timestamp; Cornflakes unpacks it from the same type URL.
    let arena = Arena::copying();
    let theirs = prost_types::Any::from_msg(&prost_types::Timestamp { seconds: 1, nanos: 2 }).unwrap();
    let mut any = wk::Any::new_in(&arena);
    any.set_type_url(&theirs.type_url);
    assert!(any.is::<wk::Timestamp<'_>>());
    let mut ts = wk::Timestamp::new_in(&arena);
    ts.set_seconds(1);
    let ours = wk::Any::from_msg(&ts, &arena).unwrap();
    assert_eq!(ours.get_type_url().as_str(), Ok(theirs.type_url.as_str()));
}
