//! Sends a [`Frame`] through Redis's reply API. Redis downgrades RESP3 shapes for RESP2 clients
//! itself (a map becomes a flat array, a boolean an integer, a null a null bulk), exactly as
//! `Frame::encode` does in sift-server, so both transports send the same bytes.

use std::ffi::{c_long, CString};

use redis_module::raw;
use sift_commands::Frame;

fn c_string(s: &str) -> CString {
    // Reply texts never hold NUL; replace it rather than lose the reply if one ever does.
    CString::new(s.replace('\0', " ")).expect("NUL bytes were replaced")
}

/// Replies with `frame` on `ctx`.
///
/// # Safety
/// `ctx` is the context of the command being answered, and `RedisModule_Init` has run.
pub unsafe fn send(ctx: *mut raw::RedisModuleCtx, frame: &Frame) {
    // SAFETY (all calls below): the API pointers are filled at load; `ctx` is valid per the
    // caller; buffers are valid for the stated lengths during each call.
    unsafe {
        match frame {
            Frame::Simple(s) => {
                let s = c_string(s);
                raw::RedisModule_ReplyWithSimpleString.unwrap()(ctx, s.as_ptr());
            }
            Frame::Error(e) => {
                let e = c_string(e);
                raw::RedisModule_ReplyWithError.unwrap()(ctx, e.as_ptr());
            }
            Frame::Integer(i) => {
                raw::RedisModule_ReplyWithLongLong.unwrap()(ctx, *i);
            }
            Frame::Bulk(b) => {
                raw::RedisModule_ReplyWithStringBuffer.unwrap()(ctx, b.as_ptr().cast(), b.len());
            }
            Frame::Null => {
                raw::RedisModule_ReplyWithNull.unwrap()(ctx);
            }
            Frame::NullArray => {
                raw::RedisModule_ReplyWithNullArray.unwrap()(ctx);
            }
            Frame::Array(items) => {
                raw::RedisModule_ReplyWithArray.unwrap()(ctx, items.len() as c_long);
                for f in items {
                    send(ctx, f);
                }
            }
            Frame::Map(pairs) => {
                raw::RedisModule_ReplyWithMap.unwrap()(ctx, pairs.len() as c_long);
                for (k, v) in pairs {
                    send(ctx, k);
                    send(ctx, v);
                }
            }
            Frame::Set(items) => {
                raw::RedisModule_ReplyWithSet.unwrap()(ctx, items.len() as c_long);
                for f in items {
                    send(ctx, f);
                }
            }
            Frame::Double(d) => {
                raw::RedisModule_ReplyWithDouble.unwrap()(ctx, *d);
            }
            Frame::Boolean(b) => {
                raw::RedisModule_ReplyWithBool.unwrap()(ctx, *b as i32);
            }
            Frame::Verbatim(t) => {
                raw::RedisModule_ReplyWithVerbatimString.unwrap()(ctx, t.as_ptr().cast(), t.len());
            }
        }
    }
}
