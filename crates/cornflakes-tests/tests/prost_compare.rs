//! Property test against prost: for the same logical values of
//! `acme.payments.Charge` (a string, a nested message from another package,
//! an open enum given any `i32`, a oneof of two messages and a string, a
//! nested enum, a well-known `Timestamp`, a `map<string, string>`, an
//! `optional` string, a `uint64` at field 100000), what Cornflakes decodes
//! equals what prost decodes. The prost types below are what prost-build
//! generates for the schema (written out, since there is no protoc here).

use std::collections::HashMap;

use cornflakes::{Arena, Message, Pool};
use cornflakes_tests::corpus::acme::{payments, r#type};
use proptest::prelude::*;

mod pb {
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
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 256 }, ..ProptestConfig::default() })]

    #[test]
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
