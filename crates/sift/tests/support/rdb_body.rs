//! Shared by the RDB golden-file tests: RedisBloom's module value bodies laid out the way this
//! crate's writer lays them out, so that re-encoded values can be compared byte for byte.

use sift::compat::redisbloom::rdb::{
    module_type_name, write_length, write_string, RdbCursor, OPCODE_DOUBLE, OPCODE_EOF, OPCODE_STRING,
    OPCODE_UINT, TOPK_TYPE_NAME,
};

/// A module value (type byte, module id, fields, EOF) with every string in plain form (LZF
/// expanded), every length in the shortest form, and the Top-K heap records' pointer bytes (a
/// live address in RedisBloom, spec `redisbloom-sketches.md` §10.4) set as this crate writes
/// them: 1 for an occupied slot, 0 for an empty one.
pub fn normalize_body(body: &[u8]) -> Vec<u8> {
    let mut cur = RdbCursor::new(body);
    let mut out = vec![cur.read_u8("type").unwrap()];
    let id = cur.read_length("module id").unwrap();
    write_length(&mut out, id);
    let topk = module_type_name(id).0 == TOPK_TYPE_NAME;
    let mut strings = 0;
    loop {
        let op = cur.read_length("opcode").unwrap();
        write_length(&mut out, op);
        match op {
            OPCODE_EOF => break,
            OPCODE_UINT => write_length(&mut out, cur.read_length("uint").unwrap()),
            OPCODE_DOUBLE => out.extend_from_slice(cur.read_bytes(8, "double").unwrap()),
            OPCODE_STRING => {
                let mut s = cur.read_string(1 << 24, "string").unwrap();
                strings += 1;
                if topk && strings == 2 {
                    for rec in s.chunks_exact_mut(24) {
                        let occupied = rec[8..16].iter().any(|&b| b != 0);
                        rec[8..16].copy_from_slice(&(occupied as u64).to_le_bytes());
                    }
                }
                write_string(&mut out, &s);
            }
            op => panic!("opcode {op} in a RedisBloom value"),
        }
    }
    assert_eq!(cur.remaining(), 0);
    out
}
