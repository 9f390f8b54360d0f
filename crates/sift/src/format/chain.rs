//! The payload of the chain kinds ([`crate::ScalableBloom`], [`crate::ScalableCuckoo`]): complete
//! sift files of the member kind, oldest first, each preceded by its length as a `u64`, with no
//! padding between them.

use super::{Encoder, FilterKind, FormatError};
use crate::hash::Hasher;

/// A file of `kind` whose payload is `members` (each a complete sift file) in order.
pub(crate) fn encode_chain(kind: FilterKind, hasher: Hasher, params: &[u8], members: &[Vec<u8>]) -> Vec<u8> {
    let len: u64 = members.iter().map(|m| 8 + m.len() as u64).sum();
    let mut e = Encoder::new(kind, hasher, params, len);
    for m in members {
        e.payload().extend_from_slice(&(m.len() as u64).to_le_bytes());
        e.payload().extend_from_slice(m);
    }
    e.finish()
}

/// Splits a chain payload into exactly `count` member files (borrowed, not yet decoded).
/// `names` are the member's name in errors: (its length field, the member itself).
pub(crate) fn split_chain<'a>(
    payload: &'a [u8],
    count: usize,
    names: (&'static str, &'static str),
) -> Result<Vec<&'a [u8]>, FormatError> {
    let mut rest = payload;
    let mut members = Vec::with_capacity(count.min(payload.len() / 8));
    for _ in 0..count {
        let Some((len, tail)) = rest.split_first_chunk::<8>() else {
            return Err(FormatError::Truncated { what: names.0, needed: 8, available: rest.len() as u64 });
        };
        let len = u64::from_le_bytes(*len);
        if len > tail.len() as u64 {
            return Err(FormatError::Truncated { what: names.1, needed: len, available: tail.len() as u64 });
        }
        let (member, tail) = tail.split_at(len as usize);
        members.push(member);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(FormatError::TrailingBytes { extra: rest.len() as u64 });
    }
    Ok(members)
}
