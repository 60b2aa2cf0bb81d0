//! How `cf` fails, and the exit code of each way.

use std::process::ExitCode;

/// Why `cf` stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The arguments cannot work together (clap reports the ones it can
    /// check by itself, with the same exit code).
    #[error("{0}\n(see `cf <subcommand> --help`)")]
    Usage(String),
    /// The run failed.
    #[error(transparent)]
    Failed(cornflakes_eval::Error),
    /// The socket monitor could not start or stopped.
    #[error("socket monitor: {0} (is another monitor running on that address?)")]
    Monitor(std::io::Error),
}

impl From<cornflakes_eval::Error> for CliError {
    fn from(e: cornflakes_eval::Error) -> Self {
        if e.is_invalid() {
            CliError::Usage(e.to_string())
        } else {
            CliError::Failed(e)
        }
    }
}

impl CliError {
    /// 2 for usage errors (as clap's own), 1 for failures.
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) => ExitCode::from(2),
            CliError::Failed(_) | CliError::Monitor(_) => ExitCode::FAILURE,
        }
    }
}
