//! Glob-style pattern matching as Redis does it for `KEYS`, `SCAN MATCH` and `CONFIG GET`:
//! `*` (any run of bytes), `?` (one byte), `[abc]`, `[^abc]`, `[a-z]` and `\x` (a literal `x`).
//! Matching is on bytes, so keys need not be UTF-8.

/// Does `text` match `pattern`? `nocase` folds ASCII letters (CONFIG GET matches that way).
pub fn matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    // Iterative matcher with single-star backtracking: when a later `*` is met, the earlier one
    // never needs revisiting, so the run time is O(|pattern|·|text|) at worst with no recursion
    // (a pattern of many stars cannot blow the stack or take exponential time).
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, t));
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class(pattern, p, text[t], nocase) {
                        if hit {
                            p = next;
                            t += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if eq(pattern[p + 1], text[t]) {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, text[t]) {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        // Mismatch: let the last star swallow one more byte, or fail.
        match star {
            Some((sp, st)) => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches byte `c` against the class starting at `pattern[start] == b'['`. Returns whether it
/// matched and the index after the class. An unterminated class runs to the end of the pattern,
/// as in Redis's `stringmatchlen`.
fn class(pattern: &[u8], start: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let c = fold(c);
    let mut i = start + 1;
    let negate = i < pattern.len() && pattern[i] == b'^';
    if negate {
        i += 1;
    }
    let mut hit = false;
    while i < pattern.len() && pattern[i] != b']' {
        if pattern[i] == b'\\' && i + 1 < pattern.len() {
            hit |= fold(pattern[i + 1]) == c;
            i += 2;
        } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']' {
            let (mut lo, mut hi) = (fold(pattern[i]), fold(pattern[i + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            hit |= lo <= c && c <= hi;
            i += 3;
        } else {
            hit |= fold(pattern[i]) == c;
            i += 1;
        }
    }
    let next = if i < pattern.len() { i + 1 } else { i };
    Some((hit != negate, next))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn glob_cases() {
        let m = |p: &str, t: &str| matches(p.as_bytes(), t.as_bytes(), false);
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("bf-*", "bf-error-rate"));
        assert!(!m("bf-*", "cf-bucket-size"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!m("*a*b*c*", "xxaxxcxxbxx"));
        assert!(m("key:*:end", "key:1:2:end"));
        assert!(matches(b"BF-*", b"bf-initial-size", true));
        // Pathological pattern finishes quickly.
        let p = "*a".repeat(50) + "b";
        assert!(!m(&p, &"a".repeat(200)));
    }
}
