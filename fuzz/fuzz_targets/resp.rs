//! Feeds arbitrary bytes to the server's RESP request parser, as a connection would: check
//! that a whole request is buffered (without allocating), then parse exactly that many bytes.
//!
//! Whatever the input, nothing may panic or allocate beyond the limits; a request that the
//! check calls complete must parse or be refused with a protocol error, never read past its
//! length; parsing the buffer request by request always makes progress. Run with a nightly
//! toolchain: `cargo +nightly fuzz run resp`.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sift_server::frame::{check_request, parse_request, Check, Limits};

fuzz_target!(|data: &[u8]| {
    // Small limits, so the fuzzer reaches them; and the defaults.
    for limits in [Limits { max_bulk_len: 64, max_multibulk_len: 16, max_inline_len: 128 }, Limits::default()] {
        let mut buf = Bytes::copy_from_slice(data);
        loop {
            match check_request(&buf, &limits) {
                Ok(Check::Incomplete) | Err(_) => break,
                Ok(Check::Complete(len)) => {
                    assert!(len > 0 && len <= buf.len(), "complete request of {len} bytes in {}", buf.len());
                    let frame = buf.split_to(len);
                    if let Ok(argv) = parse_request(frame.clone()) {
                        // Every argument is a slice of the frame, so none can be longer than it.
                        assert!(argv.iter().map(|a| a.len()).sum::<usize>() <= frame.len());
                    }
                }
            }
        }
    }
});
