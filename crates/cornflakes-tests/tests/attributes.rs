//! Attributes added through `Config::type_attribute` and its enum form
//! (the corpus's build script): they reach the generated code and take
//! effect there.

use cornflakes_tests::corpus::acme::maps::Tier;

#[test]
fn an_enum_attribute_derive_works_on_the_generated_enum() {
    assert_eq!(serde_json::to_string(&Tier::Gold).unwrap(), "\"Gold\"");
    assert_eq!(serde_json::to_string(&[Tier::Unspecified, Tier::Silver]).unwrap(), "[\"Unspecified\",\"Silver\"]");
}
