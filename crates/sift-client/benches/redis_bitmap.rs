//! sift-client against the seeds' Redis Bloom filter and against the sift module, in one run on
//! one redis-server (results: docs/BENCHMARKS.md, "Bloom filters in plain Redis").
//!
//! ```text
//! cargo build --release -p sift-redis          # the module, for BF.MADD / BF.MEXISTS
//! cargo bench -p sift-client --bench redis_bitmap [-- --capacity 10000000 --items 200000 --rounds 3]
//! ```
//!
//! One `redis-server` (from PATH) is started with `libsift_redis.so` (`$SIFT_REDIS_MODULE`, else
//! `target/release/`). Every variant holds a filter sized for `--capacity` items at 1% and, each
//! round, adds `--items` fresh items and queries `--items` items (half of them members), in
//! batches of `--batch` items per round trip on one sync connection; the variants take turns
//! within each round, so the machine's load falls on all of them alike. Per variant and
//! operation: items/s (lowest–highest over the rounds), the request and reply bytes per item
//! (the server's `total_net_input_bytes` / `total_net_output_bytes`), and the server memory of
//! the full-size filter per item.
//!
//! * `setbit` / `getbit`: the seed articles' filter (seed 003's `RedisBloomFilter.addList`, Redisson's
//!   layout): one bitmap of `m = -n ln p / ln² 2` bits, `k = 7` positions `h1 + i·h2 mod m` from
//!   MurmurHash3_x64_128 (Guava's scheme), one `SETBIT` / `GETBIT` per position, pipelined.
//! * `sift-client plain` / `sift-client lua`: this crate, `Mode::Plain` and `Mode::Lua`.
//! * `bitfield_ro`: the same layout queried with `BITFIELD_RO … GET u1` instead of `GETRANGE`
//!   (hand-built here), to show why the crate queries with `GETRANGE`.
//! * `BF.MADD` / `BF.MEXISTS`: the sift module (`BF.RESERVE key 0.01 <capacity>`), hashing on the
//!   server.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sift_client::layout::{Split, Spot};
use sift_client::{Filter, Mode, Options, Spec};

struct Args {
    capacity: u64,
    items: usize,
    rounds: usize,
    batch: usize,
}

fn args() -> Args {
    let mut a = Args { capacity: 10_000_000, items: 200_000, rounds: 3, batch: 1000 };
    let v: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < v.len() {
        let next = || v.get(i + 1).and_then(|s| s.parse::<u64>().ok());
        match v[i].as_str() {
            "--capacity" => a.capacity = next().expect("--capacity N"),
            "--items" => a.items = next().expect("--items N") as usize,
            "--rounds" => a.rounds = next().expect("--rounds N") as usize,
            "--batch" => a.batch = next().expect("--batch N") as usize,
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

struct Redis {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn module() -> PathBuf {
    if let Some(p) = std::env::var_os("SIFT_REDIS_MODULE") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/libsift_redis.so");
    assert!(
        root.exists(),
        "{} missing: cargo build --release -p sift-redis (or set SIFT_REDIS_MODULE)",
        root.display()
    );
    root
}

fn start_redis() -> Redis {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
        .arg("--loadmodule")
        .arg(module())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server on PATH");
    // Killed and waited for on drop, also if it never answers.
    let redis = Redis { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut s) = TcpStream::connect(redis.addr) {
            let _ = s.write_all(b"PING\r\n");
            let mut b = [0u8; 7];
            if s.read_exact(&mut b).is_ok() && &b == b"+PONG\r\n" {
                return redis;
            }
        }
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// CPU seconds (user + system) used so far by process `pid` (`self` for this one), from
/// /proc/PID/stat (Linux; clock ticks of 1/100 s).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat (Linux)");
    // The fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn info(conn: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let text: String = redis::cmd("INFO").arg(section).query(conn).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
}

fn net(conn: &mut redis::Connection) -> (u64, u64) {
    (info(conn, "stats", "total_net_input_bytes"), info(conn, "stats", "total_net_output_bytes"))
}

fn item(tag: &str, i: usize) -> String {
    format!("{tag}:user:{i:012}")
}

/// The seeds' filter: positions `h1 + i·h2 mod m` (i = 1..=k) from MurmurHash3_x64_128 of the
/// item, as Guava derives them (seed 003).
fn seed_positions(it: &str, m: u64, k: u32) -> impl Iterator<Item = u64> {
    // Guava's asLong() is the first 64-bit word; its low and high halves are the two hashes.
    let (a, _) = sift::hash::murmur3_x64_128(it.as_bytes(), 0);
    let (h1, h2) = (a as u32 as i32, (a >> 32) as u32 as i32);
    (1..=k as i32).map(move |i| {
        let mut h = h1.wrapping_add(i.wrapping_mul(h2));
        if h < 0 {
            h = !h;
        }
        h as u64 % m
    })
}

/// The operations of one variant.
trait Variant {
    fn name(&self) -> &'static str;
    fn add(&mut self, conn: &mut redis::Connection, items: &[String]);
    fn contains(&mut self, conn: &mut redis::Connection, items: &[String]) -> usize;
}

struct Seeds {
    m: u64,
    k: u32,
}

impl Variant for Seeds {
    fn name(&self) -> &'static str {
        "seeds: k × SETBIT / GETBIT"
    }
    fn add(&mut self, conn: &mut redis::Connection, items: &[String]) {
        let mut p = redis::pipe();
        for it in items {
            for pos in seed_positions(it, self.m, self.k) {
                p.cmd("SETBIT").arg("seeds").arg(pos).arg(1).ignore();
            }
        }
        let () = p.query(conn).unwrap();
    }
    fn contains(&mut self, conn: &mut redis::Connection, items: &[String]) -> usize {
        let mut p = redis::pipe();
        for it in items {
            for pos in seed_positions(it, self.m, self.k) {
                p.cmd("GETBIT").arg("seeds").arg(pos);
            }
        }
        let bits: Vec<u8> = p.query(conn).unwrap();
        bits.chunks(self.k as usize).filter(|c| c.iter().all(|b| *b == 1)).count()
    }
}

struct Client {
    f: Filter,
    label: &'static str,
}

impl Variant for Client {
    fn name(&self) -> &'static str {
        self.label
    }
    fn add(&mut self, conn: &mut redis::Connection, items: &[String]) {
        self.f.add_many(conn, items).unwrap();
    }
    fn contains(&mut self, conn: &mut redis::Connection, items: &[String]) -> usize {
        self.f.contains_many(conn, items).unwrap().into_iter().filter(|x| *x).count()
    }
}

/// The crate's layout queried with BITFIELD_RO (one command per key and batch).
struct BitfieldRo {
    f: Filter,
}

impl Variant for BitfieldRo {
    fn name(&self) -> &'static str {
        "layout, BITFIELD_RO query"
    }
    fn add(&mut self, conn: &mut redis::Connection, items: &[String]) {
        self.f.add_many(conn, items).unwrap();
    }
    fn contains(&mut self, conn: &mut redis::Connection, items: &[String]) -> usize {
        let rec = self.f.record();
        let g = &rec.gens[0];
        let split = Split::new(g.blocks, rec.key_bytes);
        let mut by_key: BTreeMap<u64, Vec<Spot>> = BTreeMap::new();
        for it in items {
            let s = Spot::of(rec.hasher.digest(it.as_bytes()), g, split);
            by_key.entry(s.key).or_default().push(s);
        }
        let mut p = redis::pipe();
        let mut counts = Vec::new();
        for (key, spots) in &by_key {
            let mut c = redis::cmd("BITFIELD_RO");
            c.arg(format!("{{bench-ro:{}:{}:{key}}}", rec.instance, g.id));
            for s in spots {
                let n = s.redis_offsets().count();
                for o in s.redis_offsets() {
                    c.arg("GET").arg("u1").arg(o);
                }
                counts.push(n);
            }
            p.add_command(c);
        }
        let replies: Vec<Vec<u8>> = p.query(conn).unwrap();
        let bits: Vec<u8> = replies.into_iter().flatten().collect();
        let mut at = 0;
        counts
            .iter()
            .filter(|&&n| {
                let all = bits[at..at + n].iter().all(|b| *b == 1);
                at += n;
                all
            })
            .count()
    }
}

struct Module;

impl Variant for Module {
    fn name(&self) -> &'static str {
        "sift module: BF.MADD / BF.MEXISTS"
    }
    fn add(&mut self, conn: &mut redis::Connection, items: &[String]) {
        let _: Vec<i64> = redis::cmd("BF.MADD").arg("module").arg(items).query(conn).unwrap();
    }
    fn contains(&mut self, conn: &mut redis::Connection, items: &[String]) -> usize {
        let v: Vec<i64> = redis::cmd("BF.MEXISTS").arg("module").arg(items).query(conn).unwrap();
        v.into_iter().filter(|x| *x == 1).count()
    }
}

#[derive(Default)]
struct Stats {
    add: Vec<f64>,
    contains: Vec<f64>,
    /// Server and client CPU seconds, summed over the rounds.
    add_cpu: (f64, f64),
    q_cpu: (f64, f64),
    add_in: f64,
    add_out: f64,
    q_in: f64,
    q_out: f64,
    rounds: usize,
}

fn range(v: &[f64]) -> (f64, f64) {
    (v.iter().cloned().fold(f64::INFINITY, f64::min), v.iter().cloned().fold(0.0, f64::max))
}

fn main() {
    let a = args();
    let redis = start_redis();
    let url = format!("redis://{}/", redis.addr);
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let server_pid = redis.child.id().to_string();
    let p: f64 = 0.01;
    let n = a.capacity;
    let m = (-(n as f64) * p.ln() / (2f64.ln().powi(2))).ceil() as u64;
    let k = 7;
    eprintln!(
        "capacity {n}, p = {p}: seeds' bitmap m = {m} bits ({:.1} MiB), k = {k}; {} items per op per round, {} rounds, batches of {}",
        m as f64 / 8.0 / 1048576.0,
        a.items,
        a.rounds,
        a.batch
    );

    // Memory of each full-size, empty filter: MEMORY USAGE of its keys (value, key, object and
    // dict entry, as Redis accounts them), against the bytes of its bitmap.
    let usage = |conn: &mut redis::Connection, keys: &[Vec<u8>]| -> f64 {
        keys.iter()
            .map(|k| {
                redis::cmd("MEMORY").arg("USAGE").arg(k).arg("SAMPLES").arg(0).query::<i64>(conn).unwrap()
                    as f64
            })
            .sum()
    };
    let mut memory: Vec<(String, f64, f64)> = Vec::new();
    let _: i64 = redis::cmd("SETBIT").arg("seeds").arg(m - 1).arg(0).query(&mut conn).unwrap();
    memory.push((
        "seeds: one bitmap (SETBIT at its last bit)".into(),
        usage(&mut conn, &[b"seeds".to_vec()]),
        m as f64 / 8.0,
    ));
    let mut opts = Options::new().batch_items(a.batch);
    if let Some(ipc) = std::env::var("SIFT_BENCH_ITEMS_PER_COMMAND").ok().and_then(|v| v.parse().ok()) {
        opts = opts.items_per_command(ipc);
    }
    let spec = Spec::new(n, p);
    let plain = Filter::create(&mut conn, "bench-plain", &spec, opts.clone()).unwrap();
    let rec = plain.record();
    let split = Split::new(rec.gens[0].blocks, rec.key_bytes);
    let mut keys: Vec<Vec<u8>> =
        (0..split.keys()).map(|i| format!("{{bench-plain:{}:0:{i}}}", rec.instance).into_bytes()).collect();
    keys.push(b"bench-plain".to_vec());
    keys.push(format!("{{bench-plain}}:{}:0", rec.instance).into_bytes());
    memory.push((
        format!(
            "sift-client: {} sub-bitmaps of at most {} bytes, pointer, record",
            split.keys(),
            rec.key_bytes
        ),
        usage(&mut conn, &keys),
        rec.gens[0].blocks as f64 * 64.0,
    ));
    let lua = Filter::create(&mut conn, "bench-lua", &spec, opts.clone().mode(Mode::Lua)).unwrap();
    let ro = Filter::create(&mut conn, "bench-ro", &spec, opts.clone()).unwrap();
    let _: () = redis::cmd("BF.RESERVE").arg("module").arg(p).arg(n).query(&mut conn).unwrap();
    // Compared with the classic bitmap of the same n and p (RedisBloom sizes its layer so).
    memory.push(("sift module: BF.RESERVE".into(), usage(&mut conn, &[b"module".to_vec()]), m as f64 / 8.0));

    let mut variants: Vec<Box<dyn Variant>> = vec![
        Box::new(Seeds { m, k }),
        Box::new(Client { f: plain, label: "sift-client plain (BITFIELD / GETRANGE)" }),
        Box::new(Client { f: lua, label: "sift-client lua (EVALSHA)" }),
        Box::new(BitfieldRo { f: ro }),
        Box::new(Module),
    ];
    let mut stats: Vec<Stats> = variants.iter().map(|_| Stats::default()).collect();
    for round in 0..a.rounds {
        for (vi, v) in variants.iter_mut().enumerate() {
            let adds: Vec<String> = (0..a.items).map(|i| item(&format!("r{round}"), i)).collect();
            let probes: Vec<String> =
                (0..a.items)
                    .map(|i| {
                        if i % 2 == 0 {
                            item(&format!("r{round}"), i)
                        } else {
                            item(&format!("x{round}"), i)
                        }
                    })
                    .collect();
            let (i0, o0) = net(&mut conn);
            let (s0, c0) = (cpu_seconds(&server_pid), cpu_seconds("self"));
            let t = Instant::now();
            for c in adds.chunks(a.batch) {
                v.add(&mut conn, c);
            }
            let add_s = t.elapsed().as_secs_f64();
            let (s1, c1) = (cpu_seconds(&server_pid), cpu_seconds("self"));
            let (i1, o1) = net(&mut conn);
            let t = Instant::now();
            let mut found = 0;
            for c in probes.chunks(a.batch) {
                found += v.contains(&mut conn, c);
            }
            let q_s = t.elapsed().as_secs_f64();
            let (s2, c2) = (cpu_seconds(&server_pid), cpu_seconds("self"));
            let (i2, o2) = net(&mut conn);
            assert!(found >= a.items / 2, "{}: {found} found of {} members", v.name(), a.items / 2);
            let s = &mut stats[vi];
            s.add.push(a.items as f64 / add_s);
            s.contains.push(a.items as f64 / q_s);
            s.add_in += (i1 - i0) as f64 / a.items as f64;
            s.add_out += (o1 - o0) as f64 / a.items as f64;
            s.q_in += (i2 - i1) as f64 / a.items as f64;
            s.q_out += (o2 - o1) as f64 / a.items as f64;
            s.add_cpu.0 += s1 - s0;
            s.add_cpu.1 += c1 - c0;
            s.q_cpu.0 += s2 - s1;
            s.q_cpu.1 += c2 - c1;
            s.rounds += 1;
            eprintln!(
                "round {round} {:<42} add {:>9.0}/s  contains {:>9.0}/s",
                v.name(),
                a.items as f64 / add_s,
                a.items as f64 / q_s
            );
        }
    }
    println!("\n| variant | add items/s | contains items/s | add bytes/item sent / received | contains bytes/item sent / received |");
    println!("|---|---:|---:|---:|---:|");
    for (v, s) in variants.iter().zip(&stats) {
        let (a0, a1) = range(&s.add);
        let (q0, q1) = range(&s.contains);
        let r = s.rounds as f64;
        println!(
            "| {} | {:.0}–{:.0} | {:.0}–{:.0} | {:.0} / {:.0} | {:.0} / {:.0} |",
            v.name(),
            a0,
            a1,
            q0,
            q1,
            s.add_in / r,
            s.add_out / r,
            s.q_in / r,
            s.q_out / r
        );
    }
    // CPU per item: what a variant costs the (single-threaded) server, and the client, whatever
    // else runs on the machine.
    let total = (a.items * a.rounds) as f64;
    println!("\n| variant | server CPU µs/item add | contains | client CPU µs/item add | contains | server-bound items/s add | contains |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let cpu = |s: &Stats| {
        (
            s.add_cpu.0 / total * 1e6,
            s.q_cpu.0 / total * 1e6,
            s.add_cpu.1 / total * 1e6,
            s.q_cpu.1 / total * 1e6,
        )
    };
    for (v, s) in variants.iter().zip(&stats) {
        let (sa, sq, ca, cq) = cpu(s);
        println!(
            "| {} | {sa:.2} | {sq:.2} | {ca:.2} | {cq:.2} | {:.0} | {:.0} |",
            v.name(),
            1e6 / sa,
            1e6 / sq
        );
    }
    println!("\n| server CPU per item, ratio | add | contains |");
    println!("|---|---:|---:|");
    let (seeds_a, seeds_q, _, _) = cpu(&stats[0]);
    let (mod_a, mod_q, _, _) = cpu(&stats[4]);
    for (i, label) in [(1, "sift-client plain"), (2, "sift-client lua"), (3, "layout with BITFIELD_RO")] {
        let (sa, sq, _, _) = cpu(&stats[i]);
        println!(
            "| seeds / {label} (higher: {label} cheaper) | {:.2}× | {:.2}× |",
            seeds_a / sa,
            seeds_q / sq
        );
        println!("| module / {label} | {:.2}× | {:.2}× |", mod_a / sa, mod_q / sq);
    }

    // Ratios per round (the variants of a round ran back to back), lowest–highest.
    let per_round = |i: usize, j: usize, add: bool| -> (f64, f64) {
        let v: Vec<f64> = (0..a.rounds)
            .map(|r| {
                if add {
                    stats[i].add[r] / stats[j].add[r]
                } else {
                    stats[i].contains[r] / stats[j].contains[r]
                }
            })
            .collect();
        range(&v)
    };
    println!("\n| ratio (per round, lowest–highest) | add | contains |");
    println!("|---|---:|---:|");
    for (i, label) in [(1, "sift-client plain"), (2, "sift-client lua"), (3, "layout with BITFIELD_RO")] {
        let (a0, a1) = per_round(i, 0, true);
        let (q0, q1) = per_round(i, 0, false);
        println!("| {label} / seeds | {a0:.2}–{a1:.2}× | {q0:.2}–{q1:.2}× |");
        let (a0, a1) = per_round(i, 4, true);
        let (q0, q1) = per_round(i, 4, false);
        println!("| {label} / module | {a0:.2}–{a1:.2}× | {q0:.2}–{q1:.2}× |");
    }
    println!(
        "\n| filter for {n} items at 1% | server memory | bitmap bytes | memory / bitmap | bytes per item |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (label, used, bitmap) in &memory {
        println!("| {label} | {used:.0} | {bitmap:.0} | {:.3} | {:.2} |", used / bitmap, used / n as f64);
    }
}
