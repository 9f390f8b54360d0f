//! Generates the benchmark inputs of `scripts/bench_cli.sh`: URL-shaped lines with a chosen share of
//! repeats, or database-style keys, deterministic for a seed. Independent of `sift` (its own PRNG,
//! no dependency), so the inputs do not change when the library does.
//!
//! ```text
//! cargo run --release -p sift-filters-cli --example gen_keys -- urls 10000000 0.3 42 > /tmp/urls.txt
//! cargo run --release -p sift-filters-cli --example gen_keys -- keys 100000000 0 7 > /tmp/keys.txt
//! ```
//!
//! Arguments: `urls|keys`, number of lines, share of lines that repeat an earlier line (0 to <1),
//! seed. A repeated line copies an earlier distinct line: half the time one of the last 10 000
//! (links seen again close by, as a crawler sees them), otherwise any earlier one. Distinct lines
//! are made distinct by construction: each embeds its own index through a bijection (an odd
//! multiplier modulo 2^64), printed in a delimited position.
//!
//! URL shapes (lengths from ~30 to ~250 bytes, mean ~75): a scheme, a host among ~60 000 (a
//! subdomain, a name, a TLD), then one of several path templates (articles with slugs and dates,
//! product pages with ids, search pages with query strings and tracking parameters, static
//! assets, user profiles). Keys: `user:<id>`, `order:<uuid-ish>`, `session:<hex>`, `sku-<n>-<color>`
//! and e-mail addresses, ~10 to ~45 bytes, mean ~24.

use std::io::{self, BufWriter, Write};

/// SplitMix64: a small, well-mixed, seedable generator (Steele, Lea & Flood, OOPSLA 2014).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const TLDS: &[&str] = &["com", "org", "net", "de", "co.uk", "io", "fr", "jp", "com.br", "info", "edu", "ru"];
const SUBS: &[&str] =
    &["www", "www", "www", "blog", "shop", "news", "m", "docs", "en", "static", "forum", "api"];
const SYL: &[&str] = &[
    "ka", "lo", "mi", "ten", "ra", "vo", "sun", "bel", "tor", "ix", "an", "cor", "da", "pet", "quo", "zen",
    "mar", "lin", "go", "fi", "ste", "ber", "nor", "al",
];
const WORDS: &[&str] = &[
    "the", "best", "how", "to", "guide", "review", "new", "cheap", "city", "music", "travel", "recipe",
    "learn", "rust", "market", "health", "sports", "world", "local", "update", "release", "notes", "tips",
    "photo", "video", "game", "science", "climate", "energy", "garden", "home", "design", "history",
];
const SECTIONS: &[&str] = &[
    "news",
    "blog",
    "products",
    "category",
    "article",
    "wiki",
    "p",
    "item",
    "tag",
    "forum/thread",
    "docs/latest",
];
const PARAMS: &[&str] =
    &["utm_source", "utm_medium", "utm_campaign", "ref", "lang", "page", "sort", "sid", "q", "color"];
const EXT: &[&str] = &["jpg", "png", "css", "js", "pdf", "svg", "webp"];
const COLORS: &[&str] = &["red", "blue", "black", "white", "green", "grey"];
const MAIL: &[&str] = &["gmail.com", "yahoo.com", "example.org", "mail.de", "outlook.com"];

/// The bijection that makes distinct lines distinct: `i ↦ i·odd mod 2^64` is invertible.
fn ident(i: u64) -> u64 {
    i.wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

fn host(r: &mut Rng, out: &mut Vec<u8>) {
    // ~60 000 hosts: the host number is drawn with a skew (popular sites more often).
    let h = {
        let u = r.below(1 << 20) as f64 / (1u64 << 20) as f64;
        (u * u * u * 60_000.0) as u64
    };
    let mut hr = Rng(h ^ 0xA5A5);
    out.extend_from_slice(hr.pick(SUBS).as_bytes());
    out.push(b'.');
    for _ in 0..2 + hr.below(3) {
        out.extend_from_slice(hr.pick(SYL).as_bytes());
    }
    out.push(b'.');
    out.extend_from_slice(hr.pick(TLDS).as_bytes());
}

fn slug(r: &mut Rng, words: u64, out: &mut Vec<u8>) {
    for w in 0..words {
        if w > 0 {
            out.push(b'-');
        }
        out.extend_from_slice(r.pick(WORDS).as_bytes());
    }
}

/// The distinct URL number `i` (a pure function of `i` and the seed).
fn url(i: u64, seed: u64, out: &mut Vec<u8>) {
    let mut r = Rng(mix(i ^ seed.rotate_left(32)));
    let id = ident(i);
    out.extend_from_slice(if r.below(10) < 8 { b"https://" } else { b"http://" });
    host(&mut r, out);
    match r.below(10) {
        0..=2 => {
            // /section/yyyy/mm/slug-words-ID
            let _ = write!(out, "/{}/{}/{:02}/", r.pick(SECTIONS), 2005 + r.below(20), 1 + r.below(12));
            let n = 2 + r.below(7);
            slug(&mut r, n, out);
            let _ = write!(out, "-{id:x}");
            if r.below(3) == 0 {
                out.extend_from_slice(b".html");
            }
        }
        3..=4 => {
            // /products/slug/ID?params
            let _ = write!(out, "/{}/", r.pick(SECTIONS));
            let n = 1 + r.below(4);
            slug(&mut r, n, out);
            let _ = write!(out, "/{id}");
            for p in 0..r.below(4) {
                let _ =
                    write!(out, "{}{}={}", if p == 0 { '?' } else { '&' }, r.pick(PARAMS), r.below(100_000));
            }
        }
        5..=6 => {
            // /search?q=words&page=N&sid=ID
            out.extend_from_slice(b"/search?q=");
            for w in 0..1 + r.below(4) {
                if w > 0 {
                    out.push(b'+');
                }
                out.extend_from_slice(r.pick(WORDS).as_bytes());
            }
            let _ = write!(out, "&page={}&sid={id:016x}", 1 + r.below(20));
            if r.below(2) == 0 {
                let _ = write!(out, "&utm_source={}&utm_medium=email", r.pick(WORDS));
            }
        }
        7 => {
            // /static/aa/bb/ID.ext
            let _ = write!(out, "/static/{:02x}/{:02x}/{id:x}.{}", r.below(256), r.below(256), r.pick(EXT));
        }
        _ => {
            // /users/name-ID/tab
            out.extend_from_slice(b"/users/");
            for _ in 0..2 + r.below(3) {
                out.extend_from_slice(r.pick(SYL).as_bytes());
            }
            let _ = write!(out, "-{id:x}/{}", r.pick(&["posts", "about", "followers", ""]));
        }
    }
}

/// The distinct database key number `i`.
fn key(i: u64, seed: u64, out: &mut Vec<u8>) {
    let mut r = Rng(mix(i ^ seed.rotate_left(32)));
    let id = ident(i);
    match r.below(5) {
        0 => {
            let _ = write!(out, "user:{i}");
        }
        1 => {
            let _ = write!(out, "order:{:08x}-{:04x}-{:012x}", id >> 32, r.below(1 << 16), i);
        }
        2 => {
            let _ = write!(out, "session:{id:016x}");
        }
        3 => {
            let _ = write!(out, "sku-{i}-{}", r.pick(COLORS));
        }
        _ => {
            for _ in 0..2 + r.below(3) {
                out.extend_from_slice(r.pick(SYL).as_bytes());
            }
            let _ = write!(out, ".{i}@{}", r.pick(MAIL));
        }
    }
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 || !(args[0] == "urls" || args[0] == "keys") {
        eprintln!("usage: gen_keys urls|keys LINES REPEAT_SHARE SEED   (e.g. gen_keys urls 10000000 0.3 42)");
        std::process::exit(2);
    }
    let bad =
        |what: &str| -> io::Error { io::Error::new(io::ErrorKind::InvalidInput, format!("bad {what}")) };
    let lines: u64 = args[1].parse().map_err(|_| bad("LINES"))?;
    let share: f64 = args[2].parse().map_err(|_| bad("REPEAT_SHARE"))?;
    if !(0.0..1.0).contains(&share) {
        return Err(bad("REPEAT_SHARE (0 to <1)"));
    }
    let seed: u64 = args[3].parse().map_err(|_| bad("SEED"))?;
    let make = if args[0] == "urls" { url } else { key };
    let threshold = (share * (1u64 << 53) as f64) as u64;
    let mut r = Rng(seed);
    let mut out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let mut line = Vec::with_capacity(512);
    let mut distinct = 0u64;
    for _ in 0..lines {
        line.clear();
        let repeat = distinct > 0 && (r.next() >> 11) < threshold;
        let i = if repeat {
            if r.below(2) == 0 {
                distinct - 1 - r.below(distinct.min(10_000))
            } else {
                r.below(distinct)
            }
        } else {
            distinct += 1;
            distinct - 1
        };
        make(i, seed, &mut line);
        line.push(b'\n');
        if let Err(e) = out.write_all(&line) {
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(e);
        }
    }
    match out.flush() {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}
