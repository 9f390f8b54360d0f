//! `INFO` as monitoring clients and exporters read it, compared with a real redis-server 7.0 on
//! the same machine: the same sections for the same arguments (`default`, `all`, `everything`,
//! several names, any case, unknown names), the same field names, and the values both servers
//! know the same way (the machine's memory, the OS, the CPU time the kernel counts).

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::process::Command;

use common::{Raw, TestServer};
use sift_testkit::RedisProcess;

/// A real redis-server on a free port, with no persistence, in a private directory; killed on
/// drop.
struct RealRedis {
    _process: RedisProcess,
    addr: SocketAddr,
    /// Removed after the process is killed.
    _dir: common::TempDir,
}

impl RealRedis {
    /// `None` when redis-server is not installed (a failure under CI, where scripts/test.sh
    /// installs it).
    fn start() -> Option<RealRedis> {
        let install = "apt-get install redis-server; scripts/test.sh does it";
        if Command::new("redis-server").arg("--version").output().is_err() {
            common::external::missing("redis-server", install);
            return None;
        }
        let dir = common::temp_dir("real-redis");
        let process = RedisProcess::start(OsStr::new("redis-server"), &dir, &[] as &[&str], install)
            .unwrap_or_else(|log| panic!("redis-server did not start:\n{log}"));
        Some(RealRedis { addr: process.addr, _process: process, _dir: dir })
    }
}

/// The bulk or verbatim string of an INFO reply, as text.
fn info(c: &mut Raw, args: &[&str]) -> String {
    let mut argv = vec!["INFO"];
    argv.extend_from_slice(args);
    let raw = c.cmd(&argv);
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n").unwrap();
    assert!(head.starts_with('$') || head.starts_with('='), "INFO {args:?}: {text:?}");
    let body = body.strip_suffix("\r\n").unwrap();
    body.strip_prefix("txt:").unwrap_or(body).to_string()
}

/// Sections in order, each with its fields in order.
type Sections = Vec<(String, Vec<(String, String)>)>;

fn sections(text: &str) -> Sections {
    let mut out: Sections = Vec::new();
    for line in text.split("\r\n") {
        if let Some(h) = line.strip_prefix("# ") {
            out.push((h.to_string(), Vec::new()));
        } else if let Some((k, v)) = line.split_once(':') {
            out.last_mut().expect("a field under a header").1.push((k.to_string(), v.to_string()));
        } else {
            assert!(line.is_empty(), "not a field: {line:?}");
        }
    }
    out
}

fn headers(text: &str) -> Vec<String> {
    sections(text).into_iter().map(|(h, _)| h).collect()
}

/// Redis's sections that sift-server does not keep (per-command and per-error statistics).
const NOT_KEPT: [&str; 3] = ["Commandstats", "Errorstats", "Latencystats"];

/// sift-server's own sections, after Redis's, in every set that holds all sections.
const OURS: [&str; 1] = ["Filters"];

#[test]
fn info_has_redis_7s_sections_for_every_argument_form() {
    let Some(real) = RealRedis::start() else { return };
    let sift = TestServer::start(&[]);
    let (mut r, mut s) = (Raw::connect(real.addr), sift.raw());
    for args in [
        &[][..],
        &["default"],
        &["all"],
        &["everything"],
        &["EVERYTHING"],
        &["server", "cluster"],
        &["cluster", "server"],
        &["CPU"],
        &["keyspace", "default"],
        &["modules"],
        &["replication", "persistence", "stats", "memory", "clients"],
        &["nosuch"],
        &["server", "nosuch"],
        &["commandstats"],
        &["errorstats", "cpu"],
    ] {
        let mut want: Vec<String> =
            headers(&info(&mut r, args)).into_iter().filter(|h| !NOT_KEPT.contains(&h.as_str())).collect();
        let whole = args.is_empty()
            || args.iter().any(|a| ["default", "all", "everything"].contains(&&*a.to_lowercase()));
        if whole {
            want.extend(OURS.iter().map(|s| s.to_string()));
        }
        assert_eq!(headers(&info(&mut s, args)), want, "INFO {args:?}");
    }
    // Blank lines between sections, none at the end, as Redis.
    let text = info(&mut s, &["server", "clients"]);
    assert!(text.contains("\r\n\r\n# Clients\r\n") && !text.ends_with("\r\n\r\n"), "{text:?}");
}

#[test]
fn info_fields_are_redis_7s_with_real_values() {
    let Some(real) = RealRedis::start() else { return };
    let sift = TestServer::start(&[]);
    let (mut r, mut s) = (Raw::connect(real.addr), sift.raw());
    // Some work for the CPU counters and the keyspace.
    assert_eq!(s.cmd(&["BF.RESERVE", "bf", "0.001", "100000"]), b"+OK\r\n");
    for chunk in 0..50 {
        let items: Vec<String> = (0..2000).map(|i| format!("item-{chunk}-{i}")).collect();
        let mut args = vec!["BF.MADD", "bf"];
        args.extend(items.iter().map(String::as_str));
        s.cmd(&args);
    }
    assert_eq!(s.cmd(&["SET", "k", "v", "EX", "100"]), b"+OK\r\n");

    let redis: BTreeMap<String, Vec<(String, String)>> =
        sections(&info(&mut r, &["everything"])).into_iter().collect();
    let ours = sections(&info(&mut s, &["everything"]));
    let field = |sec: &str, name: &str| -> String {
        let fields = &ours.iter().find(|(h, _)| h == sec).unwrap_or_else(|| panic!("no # {sec}")).1;
        fields.iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no {name} in # {sec}")).1.clone()
    };
    let theirs = |sec: &str, name: &str| -> String {
        redis[sec].iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("redis: no {name}")).1.clone()
    };

    // Every field has Redis's name, in Redis's section (the persistence engine adds its own
    // counters, documented in docs/PERSISTENCE.md; sift_version is sift's).
    for (sec, fields) in &ours {
        if matches!(sec.as_str(), "Persistence" | "Modules" | "Keyspace") || OURS.contains(&sec.as_str()) {
            continue;
        }
        for (k, _) in fields {
            assert!(
                k == "sift_version" || redis[sec].iter().any(|(rk, _)| rk == k),
                "{k} is not a field of Redis 7.0's # {sec}"
            );
        }
    }
    // The fields clients and exporters read (redis-py's harness, redis-cli --stat, the
    // Prometheus exporter's basics).
    let required: &[(&str, &[&str])] = &[
        (
            "Server",
            &[
                "redis_version",
                "redis_mode",
                "os",
                "arch_bits",
                "process_id",
                "run_id",
                "tcp_port",
                "uptime_in_seconds",
                "uptime_in_days",
                "executable",
            ],
        ),
        ("Clients", &["connected_clients", "blocked_clients", "maxclients"]),
        (
            "Memory",
            &[
                "used_memory",
                "used_memory_human",
                "used_memory_rss",
                "total_system_memory",
                "maxmemory",
                "maxmemory_policy",
                "mem_allocator",
            ],
        ),
        (
            "Persistence",
            &[
                "loading",
                "async_loading",
                "rdb_changes_since_last_save",
                "rdb_bgsave_in_progress",
                "rdb_last_save_time",
                "rdb_last_bgsave_status",
                "aof_enabled",
                "aof_rewrite_in_progress",
            ],
        ),
        (
            "Stats",
            &[
                "total_connections_received",
                "total_commands_processed",
                "rejected_connections",
                "evicted_keys",
                "pubsub_channels",
                "latest_fork_usec",
            ],
        ),
        ("Replication", &["role", "connected_slaves", "master_replid", "master_repl_offset"]),
        ("CPU", &["used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"]),
        ("Cluster", &["cluster_enabled"]),
    ];
    for (sec, names) in required {
        for n in *names {
            let _ = field(sec, n);
        }
    }

    // Values that are facts of this machine and process, the same as Redis's or the kernel's.
    assert_eq!(field("Cluster", "cluster_enabled"), "0");
    assert_eq!(field("Replication", "role"), "master");
    assert_eq!(field("Server", "os"), theirs("Server", "os"));
    assert_eq!(field("Server", "arch_bits"), theirs("Server", "arch_bits"));
    assert_eq!(field("Server", "multiplexing_api"), theirs("Server", "multiplexing_api"));
    assert_eq!(field("Memory", "total_system_memory"), theirs("Memory", "total_system_memory"));
    assert_eq!(field("Server", "process_id"), sift.child.id().to_string());
    assert_eq!(field("Server", "tcp_port"), sift.port().to_string());
    assert_eq!(
        field("Server", "executable"),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_sift-server")).unwrap().display().to_string()
    );
    for id in [field("Server", "run_id"), field("Replication", "master_replid")] {
        assert!(id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }
    assert_ne!(field("Server", "run_id"), field("Replication", "master_replid"));
    assert_eq!(field("Replication", "master_replid").len(), theirs("Replication", "master_replid").len());
    assert!(field("Keyspace", "db0").starts_with("keys=2,expires=1,"));
    // CPU: what the kernel counts for the process, read right after (ticks of 10 ms).
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", sift.child.id())).unwrap();
    let f: Vec<f64> = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|v| v.parse::<f64>().unwrap() / 100.0)
        .collect();
    let ours_cpu = sections(&info(&mut s, &["cpu"]));
    let cpu = |n: &str| -> f64 { ours_cpu[0].1.iter().find(|(k, _)| k == n).unwrap().1.parse().unwrap() };
    assert!(cpu("used_cpu_user") + cpu("used_cpu_sys") > 0.0, "the MADDs took no CPU?");
    assert!(
        (cpu("used_cpu_user") - f[0]).abs() <= 0.2 && (cpu("used_cpu_sys") - f[1]).abs() <= 0.2,
        "{ours_cpu:?} vs {f:?}"
    );
    // Commands counted as Redis counts them: RESETSTAT itself, then three PINGs; INFO is
    // counted after it answers; unknown commands and arity errors are not counted.
    for c in [&mut r, &mut s] {
        c.cmd(&["CONFIG", "RESETSTAT"]);
        for _ in 0..3 {
            c.cmd(&["PING"]);
        }
        c.cmd(&["NOSUCH"]);
        c.cmd(&["GET"]);
        c.cmd(&["MULTI"]);
        c.cmd(&["PING"]);
        c.cmd(&["EXEC"]);
    }
    let count = |c: &mut Raw| {
        sections(&info(c, &["stats"]))[0]
            .1
            .iter()
            .find(|(k, _)| k == "total_commands_processed")
            .unwrap()
            .1
            .clone()
    };
    assert_eq!(count(&mut s), count(&mut r));
}
