//! Generated code under test: `example` is built from the code generator's
//! golden schema (`cornflakes-build/tests/golden/example.proto`).

/// Types generated from `example.proto`.
#[allow(missing_docs)]
pub mod example {
    include!(concat!(env!("OUT_DIR"), "/example.rs"));
}

/// Types generated from `proto/wide.proto` (40 fields, two bitmap words).
#[allow(missing_docs)]
pub mod wide {
    include!(concat!(env!("OUT_DIR"), "/wide.rs"));
}

/// One schema before (`v1`) and after (`v2`) deleting a field.
pub mod evolution {
    #[allow(missing_docs)]
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/evolution.v1.rs"));
    }
    #[allow(missing_docs)]
    pub mod v2 {
        include!(concat!(env!("OUT_DIR"), "/evolution.v2.rs"));
    }
}

/// Types generated from `proto/protowire/pwtest.proto` with the protobuf
/// wire format (`Wire::Protobuf`). Generated code must not warn: crates
/// that deny warnings include it too.
#[allow(missing_docs)]
#[deny(warnings)]
pub mod pwtest {
    include!(concat!(env!("OUT_DIR"), "/pwtest.rs"));
}

/// Types generated from `proto/protowire/events.proto` with the protobuf
/// wire: fields of Google's well-known types.
pub mod events {
    include!(concat!(env!("OUT_DIR"), "/events.rs"));
}

/// Types generated from the schema corpus (`proto/corpus`): one module per
/// proto package (`acme::r#type`, `acme::pubsub::v1`, ...). Built with
/// `#[deny(warnings, missing_docs)]`: the generated code must compile
/// without any warning, and document every public item.
#[deny(warnings, missing_docs)]
pub mod corpus {
    include!(concat!(env!("OUT_DIR"), "/corpus/mod.rs"));
}

#[cfg(test)]
mod tests {
    /// The build script's output is the checked-in golden file.
    #[test]
    fn build_output_is_the_golden_file() {
        let built = include_str!(concat!(env!("OUT_DIR"), "/example.rs"));
        let golden = include_str!("../../cornflakes-build/tests/golden/example.rs");
        assert_eq!(built, golden);
    }
}
