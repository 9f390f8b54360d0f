//! The one error type of the crate.

/// What went wrong. Every failure is one of these; nothing in the crate panics on what a server
/// answers or on what is stored in it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The filter name cannot be used.
    #[error("invalid filter name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// Bad parameters (capacity, false-positive rate, sizes), as the `sift` library reports them.
    #[error("invalid parameters: {0}")]
    Params(#[from] sift::Error),
    /// Something this crate or the server cannot do.
    #[error("{0}")]
    Unsupported(String),
    /// No filter of that name: its pointer key does not exist.
    #[error("no filter named {name:?} on this server (its key {name:?} does not exist): create it first")]
    NotFound {
        /// The filter name.
        name: String,
    },
    /// The filter was deleted (or deleted and created again) while this handle used it.
    #[error("the filter {name:?} was deleted or replaced by a new filter of the same name: open it again")]
    Deleted {
        /// The filter name.
        name: String,
    },
    /// A key holds something that is not this crate's metadata.
    #[error("key {key:?} does not hold sift filter metadata: {reason}")]
    Foreign {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The metadata was written by a newer (or unknown) layout version.
    #[error(
        "the filter's layout version is {found}, this build reads version {supported}: upgrade sift-client \
         (every client of one filter must understand its layout)"
    )]
    UnsupportedLayout {
        /// The version found.
        found: u64,
        /// The version this build reads and writes.
        supported: u64,
    },
    /// The filter exists with other parameters than the opener asked for.
    #[error(
        "the filter {name:?} exists with {field} = {found}, but this client asked for {expected}: \
         open it without a spec (Filter::open) to use it as it is, or pick another name"
    )]
    Mismatch {
        /// The filter name.
        name: String,
        /// The parameter that differs.
        field: &'static str,
        /// What the opener asked for.
        expected: String,
        /// What the filter has.
        found: String,
    },
    /// `create` found a filter of that name already.
    #[error("a filter named {name:?} already exists")]
    Exists {
        /// The filter name.
        name: String,
    },
    /// Another client changed the filter's metadata first (a concurrent grow or push).
    #[error("the filter {name:?} was changed by another client meanwhile (now at revision {rev}); retry")]
    Conflict {
        /// The filter name.
        name: String,
        /// Its revision now.
        rev: u64,
    },
    /// A key of the filter holds another type of value.
    #[error("key {key:?} holds a value that is not a string (WRONGTYPE): something else wrote to the filter's keys")]
    WrongType {
        /// The key.
        key: String,
    },
    /// The server answered an error.
    #[error("the server answered {message:?} (key {key:?})")]
    Server {
        /// The key of the command, if it had one.
        key: Option<String>,
        /// The error text (`ERR ...`, `OOM ...`, `NOSCRIPT ...`).
        message: String,
    },
    /// The server answered something this crate did not expect for a command.
    #[error("unexpected reply to {command}: {reply}")]
    Protocol {
        /// The command.
        command: String,
        /// The reply, printed.
        reply: String,
    },
    /// No answer: the connection failed before the server replied (the text of the client's
    /// error).
    #[error("connection error: {0}")]
    Connection(String),
    /// Part of a batch was answered and part was not. `answers[i]` is `Some(new)` (adds) or
    /// `Some(found)` (queries) for each item whose command the server answered, `None` for those
    /// whose fate is unknown: their command may or may not have run. Retrying the whole call is
    /// safe (adding an item twice sets no other bit), but a retried add answers "not new" for
    /// the items the failed attempt did add.
    #[error("{answers:?} before: {cause}")]
    Partial {
        /// Per item: the answer, or `None` when unknown.
        answers: Answers,
        /// What stopped the rest.
        cause: Box<Error>,
    },
    /// Reading or writing a local file (push and pull).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
}

/// The per-item answers of a batch cut short: `Some(answer)` or `None` (unknown). Printed as
/// a count, not item by item.
#[derive(Clone, PartialEq, Eq)]
pub struct Answers(pub Vec<Option<bool>>);

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.0.iter().filter(|a| a.is_some()).count();
        write!(f, "{known} of {} items answered", self.0.len())
    }
}

impl std::ops::Deref for Answers {
    type Target = [Option<bool>];
    fn deref(&self) -> &[Option<bool>] {
        &self.0
    }
}

/// An invalid-parameter error, worded as the `sift` library words its own.
pub(crate) fn param(name: &'static str, value: impl std::fmt::Display, expected: &'static str) -> Error {
    Error::Params(sift::Error::InvalidParameter { name, value: value.to_string(), expected })
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error for a server error reply (a [`redis::Value::ServerError`]) to a command on
    /// `key`; `None` for any other value.
    pub(crate) fn from_reply(key: Option<&[u8]>, v: &redis::Value) -> Option<Error> {
        match v {
            redis::Value::ServerError(e) => Some(Error::from_redis(key, e.clone().into())),
            _ => None,
        }
    }

    /// The error for a failed request: a server error reply, or no reply at all.
    pub(crate) fn from_redis(key: Option<&[u8]>, e: redis::RedisError) -> Error {
        if let Some(code) = e.code() {
            if e.kind() != redis::ErrorKind::IoError {
                if code == "WRONGTYPE" {
                    return Error::WrongType {
                        key: key.map(|k| String::from_utf8_lossy(k).into_owned()).unwrap_or_default(),
                    };
                }
                let message = match e.detail() {
                    Some(d) => format!("{code} {d}"),
                    None => code.to_string(),
                };
                return Error::Server { key: key.map(|k| String::from_utf8_lossy(k).into_owned()), message };
            }
        }
        Error::Connection(e.to_string())
    }

    /// The same error again, for each of several groups that one failure stopped.
    pub(crate) fn dup(&self) -> Error {
        match self {
            Error::WrongType { key } => Error::WrongType { key: key.clone() },
            Error::Server { key, message } => Error::Server { key: key.clone(), message: message.clone() },
            Error::Protocol { command, reply } => {
                Error::Protocol { command: command.clone(), reply: reply.clone() }
            }
            Error::Connection(m) => Error::Connection(m.clone()),
            other => Error::Connection(other.to_string()),
        }
    }
}
