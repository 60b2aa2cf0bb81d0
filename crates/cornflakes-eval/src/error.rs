//! The one error type of the evaluation code.

/// Why an evaluation run could not start or did not finish.
///
/// The message says what went wrong and, where there is one, what to do
/// about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The settings cannot work (a bad address for the transport, a rate of
    /// zero): change them. A command line reports this as a usage error.
    #[error("{0}")]
    Invalid(String),
    /// Setting up or running failed: a server did not start, a connection
    /// or the datapath failed, responses were wrong, a file could not be
    /// written.
    #[error("{0}")]
    Failed(String),
}

impl Error {
    /// Whether the caller asked for something that cannot work (as
    /// opposed to a run that failed).
    pub fn is_invalid(&self) -> bool {
        matches!(self, Error::Invalid(_))
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::Failed(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Error::Failed(message.to_owned())
    }
}
