//! Error reply texts, byte-exact to the spec (`/shared/spec/redisbloom.md` §2.2 and §10) and to
//! Redis 7/8 for the generic commands. Every error a command sends is built here.

pub use sift_commands::err::*;

/// Redis's reply to a `denyoom` command while the used memory exceeds `maxmemory` (with the
/// `noeviction` policy, the only one here).
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// A malformed option list.
pub const SYNTAX: &str = "ERR syntax error";
/// A bad integer argument of a generic command.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Commands before AUTH when a password is set.
pub const NOAUTH: &str = "NOAUTH Authentication required.";
/// HELLO without AUTH on a connection that is not authenticated.
pub const NOAUTH_HELLO: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";
/// A wrong password.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// AUTH with no password configured.
pub const AUTH_NOT_CONFIGURED: &str = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";
/// HELLO with a protocol version other than 2 or 3.
pub const NOPROTO: &str = "NOPROTO unsupported protocol version";
/// HELLO with a non-integer protocol version.
pub const HELLO_NOT_INTEGER: &str = "ERR Protocol version is not an integer or out of range";
/// SELECT of a database other than 0.
pub const DB_OUT_OF_RANGE: &str = "ERR DB index is out of range";
/// RENAME of a missing key.
pub const NO_SUCH_KEY: &str = "ERR no such key";
/// COPY of a filter key (spec §10).
pub const MODULE_KEY_COPY: &str = "ERR not supported for this module key";
/// COPY onto itself.
pub const SAME_OBJECT: &str = "ERR source and destination objects are the same";
/// CLIENT SETNAME with a bad character.
pub const CLIENT_NAME: &str = "ERR Client names cannot contain spaces, newlines or special characters.";
/// Connection refused by `maxclients`.
pub const MAX_CLIENTS: &str = "ERR max number of clients reached";
/// EXEC after a queueing error.
pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";
/// MULTI inside MULTI.
pub const MULTI_NESTED: &str = "ERR MULTI calls can not be nested";
/// EXEC outside MULTI.
pub const EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";
/// DISCARD outside MULTI.
pub const DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
/// WATCH after MULTI.
pub const WATCH_IN_MULTI: &str = "ERR WATCH inside MULTI is not allowed";
/// A bad SCAN cursor.
pub const INVALID_CURSOR: &str = "ERR invalid cursor";
/// BGSAVE while one runs.
pub const BGSAVE_IN_PROGRESS: &str = "ERR Background save already in progress";
/// BGSAVE without SCHEDULE while a log rewrite runs (Redis 7's words).
pub const BGSAVE_REWRITE_RUNNING: &str =
    "ERR Another child process is active (AOF?): can't BGSAVE right now. \
     Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.";
/// BGREWRITEAOF while a rewrite is asked for or running (Redis's words).
pub const REWRITE_IN_PROGRESS: &str = "ERR Background append only file rewriting already in progress";
/// SHUTDOWN could not save.
pub const SHUTDOWN_FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// The unknown-command error of spec §10: the name as typed, then each argument as `'<arg>' `
/// (so the text ends with a space).
pub fn unknown_command(name: &[u8], args: &[bytes::Bytes]) -> String {
    let mut s =
        format!("ERR unknown command '{}', with args beginning with: ", String::from_utf8_lossy(name));
    for a in args {
        s.push('\'');
        s.push_str(&String::from_utf8_lossy(a));
        s.push_str("' ");
    }
    s
}

/// An unknown subcommand of a container command (`CLIENT`, `CONFIG`, ...).
pub fn unknown_subcommand(sub: &[u8], container: &str) -> String {
    format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        String::from_utf8_lossy(sub),
        container.to_ascii_uppercase()
    )
}

/// SETBIT / GETBIT: an offset that is not an integer, negative, or at or past 2^32 (Redis's
/// `proto-max-bulk-len` of 512 MB, in bits).
pub const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
/// SETBIT: a value other than `0` or `1`.
pub const BIT_VALUE: &str = "ERR bit is not an integer or out of range";
/// BITPOS: a bit argument other than `0` or `1` (an integer, else [`NOT_INTEGER`]).
pub const BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";

/// `expire`-family overflow.
pub fn invalid_expire(cmd: &str) -> String {
    format!("ERR invalid expire time in '{cmd}' command")
}

/// A write refused because the append-only log can no longer be written or synced (Redis's
/// MISCONF family); the detail follows.
pub const MISCONF_AOF: &str = "MISCONF Errors writing to the AOF file";

/// The reply that replaces every reply of a batch whose log commit (write or fsync) failed:
/// none of them may claim success.
pub const COMMIT_FAILED: &str =
    "ERR the append-only log could not be written or synced: this batch's writes are not durable";
