//! Redis module strings as bytes, and back: a leaf that the store, the data types and the
//! configuration all use.

use redis_module::raw;

/// The bytes of a Redis string (valid while the string is).
///
/// # Safety
/// `s` is a valid Redis module string that outlives the returned slice.
pub unsafe fn string_bytes<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: per the caller, `s` is valid; Redis returns a pointer to `len` bytes.
    unsafe {
        let p = raw::RedisModule_StringPtrLen.unwrap()(s, &mut len);
        if p.is_null() || len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(p.cast(), len)
    }
}

/// Module strings holding `args`, created without a context (Redis retains what it keeps of
/// them) and freed on drop.
pub struct OwnedStrings(pub Vec<*mut raw::RedisModuleString>);

impl OwnedStrings {
    /// Creates one string per argument.
    ///
    /// # Safety
    /// `RedisModule_Init` has run.
    pub unsafe fn new(args: &[&[u8]]) -> OwnedStrings {
        let create = raw::RedisModule_CreateString.unwrap();
        // SAFETY: a NULL context creates strings the caller frees; each buffer is valid for its
        // length during the call.
        OwnedStrings(
            args.iter()
                .map(|a| unsafe { create(std::ptr::null_mut(), a.as_ptr().cast(), a.len()) })
                .collect(),
        )
    }
}

impl Drop for OwnedStrings {
    fn drop(&mut self) {
        for &s in &self.0 {
            // SAFETY: created by `new` without a context, freed once here.
            unsafe { raw::RedisModule_FreeString.unwrap()(std::ptr::null_mut(), s) };
        }
    }
}
