//! Errors: `redis.call`'s raised error, Redis 7's error tables and replies, mlua errors as text.

use mlua::{Lua, Table, Value};

use crate::frame::Frame;

/// The error a failed `redis.call` raises (its text is the error table's `err`).
#[derive(Debug)]
pub(super) struct CallError(pub(super) String);

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallError {}

/// The text of a [`CallError`] inside an mlua error, if it is one.
pub(super) fn call_error(e: &mlua::Error) -> Option<String> {
    match e {
        mlua::Error::CallbackError { cause, .. } => call_error(cause),
        mlua::Error::WithContext { cause, .. } => call_error(cause),
        mlua::Error::ExternalError(x) => x.downcast_ref::<CallError>().map(|c| c.0.clone()),
        _ => None,
    }
}

/// An error that is not an error table (Lua does not call the message handler for memory
/// errors): Redis's "Error running script" form.
pub(super) fn failure(sha: &str, msg: &str, limit: usize) -> Frame {
    if msg.contains("not enough memory") || msg.contains("memory limit") {
        return Frame::error(format!(
            "ERR Error running script {sha}, not enough memory: the Lua VM reached lua-maxmemory ({limit} bytes)"
        ));
    }
    Frame::error(format!("ERR Error running script {sha}, {msg}"))
}

/// The reply for an error table that ended the script: Redis 7's `<err> script: <sha>, on
/// <source>:<line>.`.
pub(super) fn script_error_reply(sha: &str, t: &Table) -> Frame {
    let msg = t.raw_get::<Option<String>>("err").ok().flatten().unwrap_or_else(|| "ERR unknown error".into());
    let source = t.raw_get::<Option<String>>("source").ok().flatten();
    let line = t.raw_get::<Option<i64>>("line").ok().flatten();
    match (source, line) {
        (Some(s), Some(l)) => Frame::error(format!("{msg} script: {sha}, on {s}:{l}.")),
        _ => Frame::error(msg),
    }
}

/// The message handler of a script's protected call, as Redis 7's: a non-table error becomes
/// `{err='ERR ' .. tostring(err)}`, and the table gets the script's `source` and `line`.
pub(super) fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let t = match err {
        Value::Table(t) if t.raw_get::<Value>("err").is_ok_and(|v| v.is_string()) => t,
        Value::Error(e) if call_error(&e).is_some() => error_table(lua, &call_error(&e).expect("checked"))?,
        other => error_table(lua, &format!("ERR {}", value_text(&other)))?,
    };
    // The innermost frame of the user's script: the raising function may be a C function
    // (`error`), the `redis.call` wrapper, or a Rust callback.
    for level in 1..64 {
        let Some(found) = lua.inspect_stack(level, |d| {
            let src = d.source();
            (src.source.as_deref() == Some("@user_script")).then(|| d.current_line())
        }) else {
            break;
        };
        if let Some(line) = found {
            t.raw_set("source", "@user_script")?;
            t.raw_set("line", line.map(|l| l as i64).unwrap_or(0))?;
            break;
        }
    }
    Ok(Value::Table(t))
}

/// `{err = text}`.
pub fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", text)?;
    Ok(t)
}

/// Redis's normalisation of an error reply for Lua (`luaPushErrorBuff`): trailing newlines cut,
/// and `ERR ` in front of a message without an error code (a single word).
pub fn reply_error_text(text: &str) -> String {
    let text = text.trim_end_matches(['\r', '\n']);
    if text.contains(' ') {
        text.to_string()
    } else {
        format!("ERR {text}")
    }
}

/// A Lua error value as text.
pub(super) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string_lossy(),
        Value::Error(e) => error_text(e),
        Value::Nil => "nil".into(),
        Value::Boolean(b) => b.to_string(),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.type_name().to_string(),
    }
}

/// The message of an mlua error, without the callback wrapping and traceback mlua adds.
pub fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::RuntimeError(s) => s.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::MemoryError(_) => "not enough memory".into(),
        mlua::Error::WithContext { cause, .. } => error_text(cause),
        other => other.to_string(),
    }
}
