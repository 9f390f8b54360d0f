//! The metrics endpoint (`--metrics-port`) and `INFO filters`, on a real `sift-server` process:
//! scraped with a real HTTP client (reqwest), the OpenMetrics text parsed strictly (every line
//! must be a descriptor, a sample of a declared family, or the final `# EOF`; histograms must be
//! cumulative and end at their count).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{temp_dir, Proc, TempDir};

/// A server started with `--metrics-port 0` (and `extra`), killed on drop.
struct Metered {
    child: Child,
    addr: SocketAddr,
    metrics: SocketAddr,
    /// Removed after the process is killed.
    _dir: TempDir,
}

impl Drop for Metered {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address at the end of a `sift-server ... on <addr>` line.
fn addr_of(line: &str, what: &str) -> SocketAddr {
    assert!(line.starts_with(&format!("sift-server {what} on ")), "{line:?}");
    line.trim().rsplit(' ').next().unwrap().parse().unwrap()
}

impl Metered {
    fn start(extra: &[&str]) -> Metered {
        let dir = temp_dir("metrics");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sift-server"))
            .args(["--port", "0", "--metrics-port", "0", "--dir"])
            .arg(&dir)
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sift-server");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (mut first, mut second) = (String::new(), String::new());
        out.read_line(&mut first).unwrap();
        out.read_line(&mut second).unwrap();
        let addr = addr_of(&first, "listening");
        let metrics = addr_of(&second, "metrics");
        Metered { child, addr, metrics, _dir: dir }
    }

    fn con(&self) -> redis::Connection {
        redis::Client::open(format!("redis://{}/", self.addr)).unwrap().get_connection().unwrap()
    }

    fn url(&self) -> String {
        format!("http://{}/metrics", self.metrics)
    }

    fn scrape(&self) -> Scrape {
        let resp = reqwest::blocking::get(self.url()).expect("GET /metrics");
        assert_eq!(resp.status(), 200);
        let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ctype.starts_with("application/openmetrics-text; version=1.0.0"), "{ctype}");
        parse(&resp.text().unwrap())
    }
}

/// One sample: its labels and value.
type Labels = BTreeMap<String, String>;

/// A parsed scrape: family name → type, and every sample by name.
#[derive(Debug, Default)]
struct Scrape {
    types: HashMap<String, String>,
    samples: Vec<(String, Labels, f64)>,
}

impl Scrape {
    /// The value of sample `name` whose labels include `want`; panics when there is not
    /// exactly one.
    fn get(&self, name: &str, want: &[(&str, &str)]) -> f64 {
        let hits: Vec<f64> = self
            .samples
            .iter()
            .filter(|(n, l, _)| {
                n == name && want.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
            })
            .map(|(_, _, v)| *v)
            .collect();
        assert_eq!(hits.len(), 1, "{name} {want:?}: {hits:?}");
        hits[0]
    }

    /// 0 when the command was never counted (its rows are then absent).
    fn calls(&self, cmd: &str) -> f64 {
        if self.samples.iter().any(|(n, l, _)| n == "sift_commands_total" && l["command"] == cmd) {
            self.get("sift_commands_total", &[("command", cmd)])
        } else {
            0.0
        }
    }
}

/// The sample suffixes a family of each type may have (OpenMetrics 1.0).
fn suffixes(kind: &str) -> &'static [&'static str] {
    match kind {
        "counter" => &["_total", "_created"],
        "histogram" => &["_bucket", "_count", "_sum", "_created"],
        "gauge" | "unknown" | "info" | "stateset" => &[""],
        other => panic!("unexpected metric type {other}"),
    }
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

/// `{a="x",b="y\"z"}` → labels; panics on anything malformed.
fn parse_labels(s: &str) -> Labels {
    let mut out = Labels::new();
    let mut rest = s;
    while !rest.is_empty() {
        let eq = rest.find("=\"").unwrap_or_else(|| panic!("label without =\" in {s:?}"));
        let key = &rest[..eq];
        assert!(is_name(key), "bad label name {key:?}");
        let mut value = String::new();
        let mut chars = rest[eq + 2..].char_indices();
        let end = loop {
            let (i, c) = chars.next().unwrap_or_else(|| panic!("unterminated label value in {s:?}"));
            match c {
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('n') => value.push('\n'),
                    Some('"') => value.push('"'),
                    Some('\\') => value.push('\\'),
                    other => panic!("bad escape {other:?} in {s:?}"),
                },
                '"' => break eq + 2 + i + 1,
                c => value.push(c),
            }
        };
        assert!(out.insert(key.to_string(), value).is_none(), "duplicate label {key} in {s:?}");
        rest = &rest[end..];
        rest = rest.strip_prefix(',').unwrap_or_else(|| {
            assert!(rest.is_empty(), "junk after a label in {s:?}");
            rest
        });
    }
    out
}

fn parse_value(v: &str) -> f64 {
    match v {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        _ => v.parse().unwrap_or_else(|_| panic!("bad value {v:?}")),
    }
}

/// A strict parser of the OpenMetrics text format, as far as sift's output uses it.
fn parse(text: &str) -> Scrape {
    let mut scrape = Scrape::default();
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.last(), Some(&""), "the text ends with a newline");
    let lines = &lines[..lines.len() - 1];
    assert_eq!(lines.last(), Some(&"# EOF"), "the text ends with # EOF");
    let mut current: Option<(String, String)> = None;
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (what, name, tail) =
                (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap_or(""));
            assert!(is_name(name), "bad family name in {line:?}");
            match what {
                "TYPE" => {
                    suffixes(tail);
                    assert!(
                        scrape.types.insert(name.to_string(), tail.to_string()).is_none(),
                        "{name} twice"
                    );
                    current = Some((name.to_string(), tail.to_string()));
                }
                "HELP" | "UNIT" => {}
                other => panic!("unknown descriptor {other} in {line:?}"),
            }
            continue;
        }
        let (head, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value in {line:?}"));
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => (n, parse_labels(l.strip_suffix('}').unwrap_or_else(|| panic!("{line:?}")))),
            None => (head, Labels::new()),
        };
        let (family, kind) = current.as_ref().unwrap_or_else(|| panic!("sample before any TYPE: {line:?}"));
        let suffix = name.strip_prefix(family.as_str()).unwrap_or_else(|| panic!("{name} outside {family}"));
        assert!(suffixes(kind).contains(&suffix), "{name} is not a sample of {kind} {family}");
        scrape.samples.push((name.to_string(), labels, parse_value(value)));
    }
    check_histograms(&scrape);
    scrape
}

/// Each histogram series: buckets in increasing `le`, cumulative counts non-decreasing, the
/// last bucket `+Inf` and equal to `_count`.
fn check_histograms(s: &Scrape) {
    for (family, kind) in &s.types {
        if kind != "histogram" {
            continue;
        }
        let mut series: BTreeMap<Labels, Vec<(f64, f64)>> = BTreeMap::new();
        for (n, l, v) in &s.samples {
            if *n == format!("{family}_bucket") {
                let mut key = l.clone();
                let le = parse_value(&key.remove("le").expect("bucket without le"));
                series.entry(key).or_default().push((le, *v));
            }
        }
        for (labels, buckets) in series {
            assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{family} {labels:?}");
            let last = buckets.last().unwrap();
            assert_eq!(last.0, f64::INFINITY, "{family} {labels:?} ends at +Inf");
            let want: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            assert_eq!(s.get(&format!("{family}_count"), &want), last.1, "{family} {labels:?}");
        }
    }
}

fn info_fields(con: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Commands are counted once they ran, error replies by kind, and each has a histogram whose
/// buckets add up to its calls; the server's gauges hold real values.
#[test]
fn counters_move_with_commands_and_errors() {
    let srv = Metered::start(&[]);
    let before = srv.scrape();
    let mut con = srv.con();
    for i in 0..5 {
        let _: i64 = redis::cmd("BF.ADD").arg("bf").arg(i).query(&mut con).unwrap();
    }
    let _: () = redis::cmd("SET").arg("s").arg("v").query(&mut con).unwrap();
    // Ran and failed: a Bloom command on a string.
    let e = redis::cmd("BF.ADD").arg("s").arg("x").query::<i64>(&mut con).unwrap_err();
    assert!(e.to_string().contains("WRONGTYPE"), "{e}");
    // Refused before running: arity, and an unknown command.
    assert!(redis::cmd("BF.ADD").arg("bf").query::<i64>(&mut con).is_err());
    assert!(redis::cmd("NO.SUCH").query::<i64>(&mut con).is_err());

    let after = srv.scrape();
    assert_eq!(after.calls("bf.add") - before.calls("bf.add"), 6.0);
    assert_eq!(after.get("sift_command_errors_total", &[("command", "bf.add"), ("kind", "failed")]), 1.0);
    assert_eq!(after.get("sift_command_errors_total", &[("command", "bf.add"), ("kind", "rejected")]), 1.0);
    assert_eq!(after.get("sift_command_errors_total", &[("command", "unknown"), ("kind", "rejected")]), 1.0);
    assert_eq!(after.get("sift_command_errors_total", &[("command", "set"), ("kind", "failed")]), 0.0);
    // The histogram of BF.ADD: six observations, each a real duration.
    let add = [("command", "bf.add")];
    assert_eq!(after.types["sift_command_duration_seconds"], "histogram");
    assert_eq!(after.get("sift_command_duration_seconds_count", &add), 6.0);
    let sum = after.get("sift_command_duration_seconds_sum", &add);
    assert!(sum > 0.0 && sum < 6.0, "{sum}");
    assert_eq!(
        after.get("sift_command_duration_seconds_bucket", &[("command", "bf.add"), ("le", "+Inf")]),
        6.0
    );

    assert_eq!(after.types["sift_connected_clients"], "gauge");
    assert_eq!(after.get("sift_connected_clients", &[]), 1.0);
    assert_eq!(after.get("sift_keys", &[]), 2.0);
    assert!(after.get("sift_memory_used_bytes", &[]) > 0.0);
    assert!(after.get("sift_memory_resident_bytes", &[]) > 1e6);
    // appendfsync always (the default): each write batch was fsynced before its reply.
    let now = std::time::UNIX_EPOCH.elapsed().unwrap().as_secs_f64();
    let fsynced = after.get("sift_persistence_last_fsync_timestamp_seconds", &[]);
    assert!(fsynced <= now + 1.0 && fsynced > now - 60.0, "{fsynced} vs {now}");
    assert!(after.get("sift_persistence_fsyncs_total", &[]) >= 1.0);
    assert!(after.get("sift_persistence_log_bytes", &[]) > before.get("sift_persistence_log_bytes", &[]));
    assert_eq!(after.get("sift_persistence_write_ok", &[]), 1.0);
    assert_eq!(after.get("sift_persistence_last_save_ok", &[]), 1.0);
    let age = after.get("sift_persistence_snapshot_age_seconds", &[]);
    assert!((0.0..60.0).contains(&age), "{age}");
    // A SAVE moves the snapshot's time.
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let saved = srv.scrape().get("sift_persistence_last_save_timestamp_seconds", &[]);
    assert!(saved >= now.floor() - 1.0, "{saved} vs {now}");
    // Anything but /metrics is not found.
    let other = reqwest::blocking::get(format!("http://{}/", srv.metrics)).unwrap();
    assert_eq!(other.status(), 404);
}

/// Scrapes until `check` accepts one (the filter monitor publishes within a round, about a
/// second); panics after 30 s with the last scrape.
fn scrape_until(srv: &Metered, what: &str, check: impl Fn(&Scrape) -> bool) -> Scrape {
    let t = Instant::now();
    loop {
        let s = srv.scrape();
        if check(&s) {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{what}: never seen; last: {:?}", s.samples);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A non-scaling Bloom filter cannot be overfilled with BF.ADD (it refuses items past its
/// capacity), but its bits can come from elsewhere: a dump of the same geometry whose bitmap is
/// 80% ones, loaded with BF.LOADCHUNK, answers "maybe" for about 0.8^k of never-added items. The
/// monitor must count it over target, name it in INFO, and forget it once it is deleted.
#[test]
fn an_overfilled_filter_moves_the_gauge() {
    let srv = Metered::start(&[]);
    let mut con = srv.con();
    // A healthy filter: 50 items in a filter for 1000.
    let _: () = redis::cmd("BF.RESERVE").arg("healthy").arg(0.01).arg(1000).query(&mut con).unwrap();
    for i in 0..50 {
        let _: i64 = redis::cmd("BF.ADD").arg("healthy").arg(i).query(&mut con).unwrap();
    }
    let s = scrape_until(&srv, "one healthy filter", |s| s.get("sift_filters", &[]) == 1.0);
    assert_eq!(s.get("sift_filters_over_target", &[]), 0.0);
    assert!(s.get("sift_filter_worst_error_ratio", &[]) < 1.0);

    // The dump of an empty filter of the same geometry, its bitmap replaced by 4 bytes of ones
    // in every 5.
    let _: () =
        redis::cmd("BF.RESERVE").arg("model").arg(0.01).arg(1000).arg("NONSCALING").query(&mut con).unwrap();
    let mut chunks: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut it = 0i64;
    loop {
        let (next, data): (i64, Vec<u8>) =
            redis::cmd("BF.SCANDUMP").arg("model").arg(it).query(&mut con).unwrap();
        if next == 0 {
            break;
        }
        chunks.push((next, data));
        it = next;
    }
    assert!(chunks.len() >= 2, "a header and at least one bitmap chunk");
    let mut set_bits = 0u64;
    let mut total_bits = 0u64;
    for (_, data) in chunks.iter_mut().skip(1) {
        for (i, b) in data.iter_mut().enumerate() {
            *b = if i % 5 == 4 { 0 } else { 0xff };
            set_bits += u64::from(b.count_ones());
            total_bits += 8;
        }
    }
    for (it, data) in &chunks {
        let _: () = redis::cmd("BF.LOADCHUNK").arg("overfilled").arg(*it).arg(data).query(&mut con).unwrap();
    }
    let _: i64 = redis::cmd("DEL").arg("model").query(&mut con).unwrap();
    let fill = set_bits as f64 / total_bits as f64;
    assert!((0.79..0.81).contains(&fill), "{fill}");
    // The filter now answers "maybe" far more often than 1%: measured on 2000 never-added items
    // (the estimate below is what the monitor reports; this checks that it is true).
    let probes: Vec<String> = (0..2000).map(|i| format!("never-{i}")).collect();
    let hits: Vec<i64> = redis::cmd("BF.MEXISTS").arg("overfilled").arg(&probes).query(&mut con).unwrap();
    let rate = hits.iter().sum::<i64>() as f64 / probes.len() as f64;
    // 0.8^7 = 0.21 for RedisBloom's 7 hashes at 1%; 2000 probes put it within ±0.06 by far
    // (binomial sd 0.009).
    assert!((0.15..0.27).contains(&rate), "{rate}");

    let s = scrape_until(&srv, "the overfilled filter", |s| s.get("sift_filters_over_target", &[]) == 1.0);
    assert_eq!(s.get("sift_filters", &[]), 2.0);
    let ratio = s.get("sift_filter_worst_error_ratio", &[]);
    assert!((15.0..27.0).contains(&ratio), "{ratio}");
    let info = info_fields(&mut con, "filters");
    assert_eq!(info["filters_over_target"], "1", "{info:?}");
    assert_eq!(info["worst_filter_key"], "overfilled");
    assert_eq!(info["worst_filter_target"], "0.01");
    let estimate: f64 = info["worst_filter_estimate"].parse().unwrap();
    assert!((rate - estimate).abs() < 0.06, "estimate {estimate}, measured {rate}");
    // Plain INFO shows the section too.
    let all: String = redis::cmd("INFO").query(&mut con).unwrap();
    assert!(all.contains("# Filters\r\nfilters:2\r\nfilters_over_target:1\r\n"), "{all}");

    let _: i64 = redis::cmd("DEL").arg("overfilled").query(&mut con).unwrap();
    scrape_until(&srv, "the gauge back to 0", |s| {
        s.get("sift_filters_over_target", &[]) == 0.0 && s.get("sift_filters", &[]) == 1.0
    });
    assert_eq!(info_fields(&mut con, "filters")["worst_filter_key"], "healthy");
}

/// The TCP ports process `pid` listens on (Linux: its socket inodes matched against
/// /proc/net/tcp and tcp6 in state LISTEN).
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string))
        .collect();
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                let port = f[1].rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports.sort();
    ports
}

/// Off by default: without the flag the process listens on its main port alone; with it, on
/// both, and the second is the metrics endpoint's.
#[test]
fn no_flag_binds_nothing_and_the_flag_binds_one_port() {
    let plain = common::TestServer::start(&[]);
    assert_eq!(listening_ports(plain.child.id()), vec![plain.port()]);
    let mut con = redis::Client::open(plain.url(false)).unwrap().get_connection().unwrap();
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("metrics-port").query(&mut con).unwrap();
    assert_eq!(got, ["metrics-port", ""]);

    let srv = Metered::start(&[]);
    let mut want = vec![srv.addr.port(), srv.metrics.port()];
    want.sort();
    assert_eq!(listening_ports(srv.child.id()), want);
    assert_eq!(srv.metrics.ip(), srv.addr.ip(), "bound on the same address");
}

/// A metrics port already in use stops the start with an error naming it; nothing is left
/// listening.
#[test]
fn a_metrics_port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = temp_dir("metrics-taken");
    let err = match Proc::start(&dir, &["--metrics-port", &port]) {
        Ok(p) => panic!("started on a port in use: {}", p.addr),
        Err(e) => e,
    };
    assert!(err.contains(&format!("cannot listen on 127.0.0.1:{port} (metrics-port)")), "{err}");
    assert!(err.contains("in use"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
