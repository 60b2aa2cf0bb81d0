//! A message's protobuf name, as prost's `Name` trait gives it: what
//! [`Any`](crate::well_known::Any) records of the message it holds.

/// The fully qualified protobuf name of a generated message
/// (`cornflakes-build` implements it for every message, as prost-build
/// does with `enable_type_names`).
///
/// # Examples
///
/// ```
/// # mod example { include!("../../cornflakes-build/tests/golden/example.rs"); }
/// use cornflakes::Name;
///
/// assert_eq!(example::GetM::NAME, "GetM");
/// assert_eq!(example::GetM::PACKAGE, "example");
/// assert_eq!(example::GetM::full_name(), "example.GetM");
/// assert_eq!(example::GetM::type_url(), "type.googleapis.com/example.GetM");
/// ```
pub trait Name {
    /// The message's name within its package: `Inner`, or `Outer.Inner`
    /// for a nested one.
    const NAME: &'static str;
    /// Its package (`""` for none).
    const PACKAGE: &'static str;

    /// `package.Name`, as the schema names the message.
    fn full_name() -> String {
        if Self::PACKAGE.is_empty() {
            Self::NAME.to_owned()
        } else {
            format!("{}.{}", Self::PACKAGE, Self::NAME)
        }
    }

    /// The type URL [`Any`](crate::well_known::Any) carries:
    /// `type.googleapis.com/` and the full name, the prefix protobuf's
    /// C++, Java and Go `Any.Pack` write (prost writes `/` alone; unpacking
    /// reads the name after the last `/`, so either is understood).
    fn type_url() -> String {
        format!("type.googleapis.com/{}", Self::full_name())
    }
}
