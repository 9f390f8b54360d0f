//! Connection and server commands (spec §10): PING, ECHO, HELLO, AUTH, SELECT, QUIT, CLIENT,
//! INFO, CONFIG, COMMAND, SAVE/BGSAVE/LASTSAVE, DEBUG RELOAD, SHUTDOWN.

use std::fmt::Write as _;

use bytes::Bytes;

use super::parse::{eq_ignore_case, parse_i64};
use super::{err, table, After, Ctx};
use crate::frame::Frame;
use crate::persist::{BgsaveStart, BgsaveWhen, RewriteStart};
use crate::shared::{ClientInfo, Shared};
use crate::version::REDIS_VERSION;

/// The version of module `bf` reported in `MODULE LIST`, `INFO modules` and `HELLO`: the
/// RedisBloom version the commands reproduce, as the sift-redis module reports it too.
pub const MODULE_VERSION: i64 = sift_commands::REDISBLOOM_VERSION as i64;

fn bulk(s: impl Into<String>) -> Frame {
    Frame::bulk(s.into())
}

/// `PING [message]`.
pub fn ping(_ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match argv.len() {
        1 => Frame::Simple("PONG".into()),
        2 => Frame::Bulk(argv[1].clone()),
        _ => Frame::error(err::arity("ping")),
    }
}

/// ECHO message.
pub fn echo(_ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    Frame::Bulk(argv[1].clone())
}

/// Is the RedisBloom module "loaded", i.e. are its commands registered?
fn module_loaded() -> bool {
    table::lookup(b"bf.add").is_some() || table::lookup(b"cf.add").is_some()
}

/// The modules as `MODULE LIST` and `HELLO` list them: RedisBloom's `bf`, built in (no file, so
/// an empty `path`, and no load arguments). A map per module; RESP2 gets it flattened, as Redis
/// sends it.
fn module_entries() -> Vec<Frame> {
    if !module_loaded() {
        return vec![];
    }
    vec![Frame::Map(vec![
        (bulk("name"), bulk("bf")),
        (bulk("ver"), Frame::Integer(MODULE_VERSION)),
        (bulk("path"), bulk("")),
        (bulk("args"), Frame::Array(vec![])),
    ])]
}

/// MODULE LIST.
pub fn module_list(_ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    Frame::Array(module_entries())
}

/// MODULE HELP, in Redis's words for the subcommands sift-server has.
pub fn module_help(_ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    let lines = [
        "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LIST",
        "    Return a list of loaded modules.",
        "LOAD | LOADEX | UNLOAD",
        "    Not supported: RedisBloom's BF.* and CF.* commands are built into sift-server.",
        "HELP",
        "    Prints this help.",
    ];
    Frame::Array(lines.iter().map(|l| Frame::Simple((*l).into())).collect())
}

/// MODULE LOAD, LOADEX and UNLOAD: refused (Redis 7 refuses them too unless
/// `enable-module-command` allows them), saying why.
pub fn module_load(_ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    Frame::error(
        "ERR MODULE LOAD, LOADEX and UNLOAD are not supported: sift-server cannot load Redis modules; the bf module (BF.* and CF.*) is built in",
    )
}

/// Checks a password for `user` (None = the default user) against `requirepass`.
fn check_password(server: &Shared, user: Option<&[u8]>, pass: &[u8]) -> bool {
    let config = server.config.read();
    let user_ok = user.is_none_or(|u| u == b"default");
    match &config.requirepass {
        // The default user without a password accepts any password.
        None => user_ok,
        Some(p) => user_ok && constant_time_eq(p.as_bytes(), pass),
    }
}

/// Compares without an early exit, so the time taken does not reveal how much of a guessed
/// password was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `AUTH [username] password`.
pub fn auth(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let (user, pass) = match argv.len() {
        2 => (None, &argv[1]),
        3 => (Some(&argv[1][..]), &argv[2]),
        _ => return Frame::error(err::SYNTAX),
    };
    if user.is_none() && ctx.server.config.read().requirepass.is_none() {
        return Frame::error(err::AUTH_NOT_CONFIGURED);
    }
    if check_password(ctx.server, user, pass) {
        ctx.session.authenticated = true;
        Frame::ok()
    } else {
        Frame::error(err::WRONGPASS)
    }
}

fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]].
pub fn hello(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let mut proto = ctx.session.protocol;
    if argv.len() >= 2 {
        match parse_i64(&argv[1]) {
            None => return Frame::error(err::HELLO_NOT_INTEGER),
            Some(v @ 2..=3) => proto = v as u8,
            Some(_) => return Frame::error(err::NOPROTO),
        }
    }
    let mut auth: Option<(&Bytes, &Bytes)> = None;
    let mut setname: Option<&Bytes> = None;
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        if eq_ignore_case(&argv[i], "auth") && more >= 2 {
            auth = Some((&argv[i + 1], &argv[i + 2]));
            i += 3;
        } else if eq_ignore_case(&argv[i], "setname") && more >= 1 {
            setname = Some(&argv[i + 1]);
            i += 2;
        } else {
            return Frame::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&argv[i])
            ));
        }
    }
    if let Some((user, pass)) = auth {
        if !check_password(ctx.server, Some(user), pass) {
            return Frame::error(err::WRONGPASS);
        }
        ctx.session.authenticated = true;
    }
    if !ctx.session.authenticated {
        return Frame::error(err::NOAUTH_HELLO);
    }
    if let Some(name) = setname {
        if !valid_client_name(name) {
            return Frame::error(err::CLIENT_NAME);
        }
        ctx.session.name = name.clone();
    }
    ctx.session.protocol = proto;
    let name = String::from_utf8_lossy(&ctx.session.name).into_owned();
    ctx.server.update_client(ctx.session.id, |c| {
        c.resp = proto;
        c.name = name;
    });
    let modules = module_entries();
    Frame::Map(vec![
        (bulk("server"), bulk("redis")),
        (bulk("version"), bulk(REDIS_VERSION)),
        (bulk("proto"), Frame::Integer(proto as i64)),
        (bulk("id"), Frame::Integer(ctx.session.id as i64)),
        (bulk("mode"), bulk("standalone")),
        (bulk("role"), bulk("master")),
        (bulk("modules"), Frame::Array(modules)),
    ])
}

/// SELECT index: this server has one database.
pub fn select(_ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match parse_i64(&argv[1]) {
        None => Frame::error(err::NOT_INTEGER),
        Some(0) => Frame::ok(),
        Some(_) => Frame::error(err::DB_OUT_OF_RANGE),
    }
}

/// QUIT: `+OK`, then the connection closes.
pub fn quit(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    ctx.session.after = After::Close;
    Frame::ok()
}

/// CLIENT SETNAME name (empty clears it).
pub fn client_setname(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    if !valid_client_name(&argv[2]) {
        return Frame::error(err::CLIENT_NAME);
    }
    ctx.session.name = argv[2].clone();
    let name = String::from_utf8_lossy(&argv[2]).into_owned();
    ctx.server.update_client(ctx.session.id, |c| c.name = name);
    Frame::ok()
}

/// CLIENT GETNAME.
pub fn client_getname(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    if ctx.session.name.is_empty() {
        Frame::Null
    } else {
        Frame::Bulk(ctx.session.name.clone())
    }
}

/// CLIENT ID.
pub fn client_id(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    Frame::Integer(ctx.session.id as i64)
}

fn client_line(id: u64, c: &ClientInfo, cmd: &str) -> String {
    let addr = c.addr.map(|a| a.to_string()).unwrap_or_default();
    let laddr = c.laddr.map(|a| a.to_string()).unwrap_or_default();
    format!(
        "id={id} addr={addr} laddr={laddr} fd=-1 name={} age={} idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={cmd} user=default redir=-1 resp={} lib-name={} lib-ver={}\n",
        c.name,
        c.since.elapsed().as_secs(),
        c.resp,
        c.lib_name,
        c.lib_ver
    )
}

/// CLIENT LIST [TYPE normal] [ID id ...].
pub fn client_list(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let mut ids: Option<Vec<u64>> = None;
    let mut i = 2;
    while i < argv.len() {
        if eq_ignore_case(&argv[i], "type") && i + 1 < argv.len() {
            let t = &argv[i + 1];
            if !["normal", "master", "replica", "pubsub"].iter().any(|n| eq_ignore_case(t, n)) {
                return Frame::error(format!("ERR Unknown client type '{}'", String::from_utf8_lossy(t)));
            }
            i += 2;
        } else if eq_ignore_case(&argv[i], "id") && i + 1 < argv.len() {
            let mut list = Vec::new();
            for a in &argv[i + 1..] {
                match parse_i64(a) {
                    Some(v) if v > 0 => list.push(v as u64),
                    _ => return Frame::error("ERR Invalid client ID"),
                }
            }
            ids = Some(list);
            i = argv.len();
        } else {
            return Frame::error(err::SYNTAX);
        }
    }
    let clients = ctx.server.clients.lock();
    let mut out = String::new();
    for (id, c) in clients.iter() {
        if ids.as_ref().is_none_or(|l| l.contains(id)) {
            let cmd = if *id == ctx.session.id { "client|list" } else { "NULL" };
            out.push_str(&client_line(*id, c, cmd));
        }
    }
    Frame::Verbatim(Bytes::from(out))
}

/// CLIENT INFO.
pub fn client_info(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    let clients = ctx.server.clients.lock();
    let line = clients
        .get(&ctx.session.id)
        .map(|c| client_line(ctx.session.id, c, "client|info"))
        .unwrap_or_default();
    Frame::Verbatim(Bytes::from(line))
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value (redis-py and redis-rs send it on connect).
pub fn client_setinfo(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let (attr, value) = (&argv[2], &argv[3]);
    let is_name = eq_ignore_case(attr, "lib-name");
    if !is_name && !eq_ignore_case(attr, "lib-ver") {
        return Frame::error(format!("ERR Unrecognized option '{}'", String::from_utf8_lossy(attr)));
    }
    if !valid_client_name(value) {
        let which = if is_name { "lib-name" } else { "lib-ver" };
        return Frame::error(format!("ERR {which} cannot contain spaces, newlines or special characters."));
    }
    let value = String::from_utf8_lossy(value).into_owned();
    ctx.server
        .update_client(ctx.session.id, |c| if is_name { c.lib_name = value } else { c.lib_ver = value });
    Frame::ok()
}

/// CLIENT NO-EVICT / NO-TOUCH on|off: accepted, no effect (there is no eviction here).
pub fn client_on_off(_ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    if eq_ignore_case(&argv[2], "on") || eq_ignore_case(&argv[2], "off") {
        Frame::ok()
    } else {
        Frame::error(err::SYNTAX)
    }
}

/// INFO's sections, in the order Redis 7 writes them, then sift's own `filters` (the filter
/// monitor, see [`crate::monitor`]). Each is in the default set, so `INFO`, `INFO default`,
/// `INFO all` and `INFO everything` give them all. Redis's `commandstats`, `errorstats` and
/// `latencystats` are not kept (the metrics endpoint has per-command counts and latencies):
/// asking for them gives nothing, as an unknown section does.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "cluster",
    "keyspace",
    "filters",
];

/// INFO [section ...]: `field:value` lines under `# Section` headers, sections separated by
/// a blank line; a verbatim string in RESP3 (spec §10). As in Redis 7: any case, several
/// sections in one call (written in Redis's order whatever the order asked), `default`, `all`
/// and `everything`, unknown names ignored. It reads the keyspace through the command's view
/// (EACH_SHARD), never by locking on its own, so it cannot deadlock inside EXEC.
pub fn info(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let mut wanted: Vec<String> = Vec::new();
    for a in &argv[1..] {
        let s = String::from_utf8_lossy(a).to_ascii_lowercase();
        match s.as_str() {
            "default" | "all" | "everything" => wanted.extend(SECTIONS.iter().map(|s| s.to_string())),
            _ => wanted.push(s),
        }
    }
    if argv.len() == 1 {
        wanted.extend(SECTIONS.iter().map(|s| s.to_string()));
    }
    let mut out = String::new();
    for section in SECTIONS.iter().filter(|s| wanted.iter().any(|w| w == *s)) {
        let body = info_section(ctx, section);
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        out.push_str(&body);
    }
    Frame::Verbatim(Bytes::from(out))
}

fn info_section(ctx: &mut Ctx<'_, '_>, section: &str) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let s = ctx.server;
    let mut o = String::new();
    // `write!` to a String cannot fail.
    macro_rules! line {
        ($($t:tt)*) => {{ let _ = write!(o, $($t)*); o.push_str("\r\n"); }};
    }
    match section {
        "server" => {
            line!("# Server");
            line!("redis_version:{REDIS_VERSION}");
            line!("redis_git_sha1:00000000");
            line!("redis_git_dirty:0");
            line!("redis_mode:standalone");
            line!("sift_version:{}", env!("CARGO_PKG_VERSION"));
            line!("os:{}", os_name());
            line!("arch_bits:{}", usize::BITS);
            if cfg!(target_os = "linux") {
                // tokio's reactor (mio) on Linux.
                line!("multiplexing_api:epoll");
            }
            line!("process_id:{}", std::process::id());
            line!("process_supervised:no");
            line!("run_id:{}", run_id());
            line!("tcp_port:{}", s.port.load(Relaxed));
            line!("server_time_usec:{}", crate::db::now_ms() * 1000);
            let up = s.started.elapsed().as_secs();
            line!("uptime_in_seconds:{up}");
            line!("uptime_in_days:{}", up / 86400);
            line!(
                "executable:{}",
                std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default()
            );
        }
        "clients" => {
            line!("# Clients");
            line!("connected_clients:{}", s.clients.lock().len());
            // No cluster bus, no blocking commands, no client-side caching: these are 0.
            line!("cluster_connections:0");
            line!("maxclients:{}", s.config.read().maxclients);
            line!("blocked_clients:0");
            line!("tracking_clients:0");
            line!("clients_in_timeout_table:0");
        }
        "memory" => {
            // used_memory is the charged size of the keyspace (the sum of MEMORY USAGE, what
            // maxmemory is checked against), not an allocator total as in Redis; the process's
            // resident size is used_memory_rss.
            line!("# Memory");
            let used = s.db.used_memory();
            line!("used_memory:{used}");
            line!("used_memory_human:{}", human_bytes(used));
            let rss = resident_bytes();
            line!("used_memory_rss:{rss}");
            line!("used_memory_rss_human:{}", human_bytes(rss));
            line!("used_memory_dataset:{used}");
            if let Some(total) = total_system_memory() {
                line!("total_system_memory:{total}");
                line!("total_system_memory_human:{}", human_bytes(total));
            }
            // Atomics the engine updates after each script: reading them takes no VM lock, so
            // INFO works inside a script too.
            let lua = s.scripting.memory.load(Relaxed);
            line!("used_memory_lua:{lua}");
            line!("used_memory_lua_human:{}", human_bytes(lua as u64));
            line!("number_of_cached_scripts:{}", s.scripting.cached.load(Relaxed));
            let max = s.config.read().maxmemory;
            line!("maxmemory:{max}");
            line!("maxmemory_human:{}", human_bytes(max));
            line!("maxmemory_policy:noeviction");
            line!("mem_allocator:libc");
        }
        "persistence" => {
            line!("# Persistence");
            let p = &s.persistence;
            let mut total = 0;
            ctx.keys.for_each_shard(|_, sh| total += sh.dirty());
            let dirty = total.saturating_sub(s.dirty_at_save.load(Relaxed));
            line!("loading:{}", p.loading() as u8);
            line!("async_loading:0");
            line!("rdb_changes_since_last_save:{dirty}");
            line!("rdb_bgsave_in_progress:{}", p.bgsave_in_progress() as u8);
            line!("rdb_last_save_time:{}", p.last_save_unix());
            line!("aof_enabled:{}", p.aof_enabled() as u8);
            line!("persistence_engine:{}", p.name());
            let extra = p.info_fields();
            for (name, default) in [
                ("rdb_last_bgsave_status", "ok"),
                ("aof_rewrite_in_progress", "0"),
                ("aof_rewrite_scheduled", "0"),
            ] {
                if !extra.iter().any(|(n, _)| *n == name) {
                    line!("{name}:{default}");
                }
            }
            for (name, value) in extra {
                line!("{name}:{value}");
            }
        }
        "stats" => {
            line!("# Stats");
            let st = &s.stats;
            line!("total_connections_received:{}", st.connections_received.load(Relaxed));
            line!("total_commands_processed:{}", st.commands_processed.sum());
            line!("rejected_connections:{}", st.rejected_connections.load(Relaxed));
            // No replication, no eviction (noeviction is the only policy), no pub/sub, and
            // snapshots are written in-process, never by a fork: these are 0.
            line!("sync_full:0");
            line!("sync_partial_ok:0");
            line!("sync_partial_err:0");
            line!("evicted_keys:0");
            line!("evicted_clients:0");
            line!("pubsub_channels:0");
            line!("pubsub_patterns:0");
            line!("pubsubshard_channels:0");
            line!("latest_fork_usec:0");
            line!("total_forks:0");
        }
        "replication" => {
            // A master with no replicas, as Redis describes one that never had any.
            line!("# Replication");
            line!("role:master");
            line!("connected_slaves:0");
            line!("master_failover_state:no-failover");
            line!("master_replid:{}", replication_id());
            line!("master_replid2:0000000000000000000000000000000000000000");
            line!("master_repl_offset:0");
            line!("second_repl_offset:-1");
            line!("repl_backlog_active:0");
            line!("repl_backlog_first_byte_offset:0");
            line!("repl_backlog_histlen:0");
        }
        "cpu" => {
            // Process-wide: sift-server has no single main thread to report apart.
            line!("# CPU");
            let t = cpu_seconds().unwrap_or_default();
            line!("used_cpu_sys:{:.6}", t.sys);
            line!("used_cpu_user:{:.6}", t.user);
            line!("used_cpu_sys_children:{:.6}", t.children_sys);
            line!("used_cpu_user_children:{:.6}", t.children_user);
        }
        "modules" => {
            line!("# Modules");
            if module_loaded() {
                line!("module:name=bf,ver={MODULE_VERSION},api=1,filters=0,usedby=[],using=[],options=[]");
            }
        }
        "cluster" => {
            line!("# Cluster");
            line!("cluster_enabled:0");
        }
        "keyspace" => {
            line!("# Keyspace");
            let (mut keys, mut expires) = (0, 0);
            ctx.keys.for_each_shard(|_, sh| {
                keys += sh.len();
                expires += sh.expires_len();
            });
            if keys > 0 {
                line!("db0:keys={keys},expires={expires},avg_ttl=0");
            }
        }
        "filters" => {
            // The monitor's published figures (no value is read here): each shard as of its
            // last walk, see `monitor` for the staleness.
            line!("# Filters");
            let h = s.filters.health();
            line!("filters:{}", h.filters);
            line!("filters_over_target:{}", h.over_target);
            if let Some(w) = &h.worst {
                // Escaped (`\n`, `\xff`): a key may hold any byte, a line may not.
                line!("worst_filter_key:{}", w.key.escape_ascii());
                line!("worst_filter_target:{}", w.target);
                line!("worst_filter_estimate:{}", w.estimate);
                line!("worst_filter_ratio:{:.4}", w.estimate / w.target);
            }
            line!("filter_monitor_rounds:{}", h.rounds);
            line!("filter_monitor_round_age_ms:{}", h.round_age.as_millis());
        }
        _ => {}
    }
    o
}

/// `uname -sr` and the machine, as Redis's `os` field (`Linux 6.1.0-18-amd64 x86_64`).
fn os_name() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let system = match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Darwin",
        other => other,
    };
    format!("{system} {} {}", release.trim(), std::env::consts::ARCH).replace("  ", " ")
}

/// 40 hex digits that differ from one run to the next (Redis's `run_id`): a hash of the
/// process id and the start time. Clients and Sentinel use it to notice a restart.
fn run_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| random_hex(0))
}

/// The replication id Redis gives a master (another 40 hex digits, fixed for the run).
fn replication_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| random_hex(1))
}

fn random_hex(salt: u64) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed = format!("{} {nanos} {salt}", std::process::id());
    let a = xxhash_rust::xxh3::xxh3_128(seed.as_bytes());
    let b = xxhash_rust::xxh3::xxh3_64_with_seed(seed.as_bytes(), 0x5eed ^ salt);
    format!("{a:032x}{b:016x}")[..40].to_string()
}

/// CPU time of the process and of its waited-for children, in seconds.
#[derive(Default)]
struct CpuSeconds {
    user: f64,
    sys: f64,
    children_user: f64,
    children_sys: f64,
}

/// From `/proc/self/stat`: utime, stime, cutime, cstime (fields 14 to 17), in clock ticks of
/// 1/100 s (`USER_HZ`, fixed at 100 by Linux's user-space interface).
fn cpu_seconds() -> Option<CpuSeconds> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after its end.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<f64> = rest.split_whitespace().skip(11).take(4).map(|v| v.parse().unwrap_or(0.0)).collect();
    let tick = |i: usize| f.get(i).copied().unwrap_or(0.0) / 100.0;
    Some(CpuSeconds { user: tick(0), sys: tick(1), children_user: tick(2), children_sys: tick(3) })
}

/// The machine's memory, from `/proc/meminfo` (`MemTotal`, in kB).
fn total_system_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Redis's `bytesToHuman`: B, K, M, G with two decimals.
fn human_bytes(n: u64) -> String {
    let f = n as f64;
    match n {
        0..=1023 => format!("{n}B"),
        1024..=1048575 => format!("{:.2}K", f / 1024.0),
        1048576..=1073741823 => format!("{:.2}M", f / 1048576.0),
        _ => format!("{:.2}G", f / 1073741824.0),
    }
}

/// The process's resident set size, from `/proc/self/statm` (0 where there is none).
pub(crate) fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .unwrap_or(0);
    // Linux pages are 4 KiB on the platforms this reads.
    pages * 4096
}

/// CONFIG GET pattern [pattern ...]: a map (flat array in RESP2) of matching parameters.
pub fn config_get(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let patterns: Vec<&[u8]> = argv[2..].iter().map(|b| &b[..]).collect();
    let pairs = ctx.server.config.read().get_matching(&patterns);
    Frame::Map(pairs.into_iter().map(|(k, v)| (bulk(k), bulk(v))).collect())
}

/// CONFIG SET name value [name value ...]: all pairs or none.
pub fn config_set(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    if argv.len() % 2 != 0 {
        return Frame::error(err::arity("config|set"));
    }
    let mut config = ctx.server.config.write();
    let mut next = config.clone();
    for pair in argv[2..].chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]);
        if let Err(e) = next.set(&name, &pair[1], false) {
            return Frame::error(e.message());
        }
    }
    *config = next;
    Frame::ok()
}

/// CONFIG RESETSTAT.
pub fn config_resetstat(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    let st = &ctx.server.stats;
    st.connections_received.store(0, std::sync::atomic::Ordering::Relaxed);
    st.rejected_connections.store(0, std::sync::atomic::Ordering::Relaxed);
    st.commands_processed.reset();
    Frame::ok()
}

/// A command or `container|sub` by name, if available.
fn find_command(name: &[u8]) -> Option<&'static table::CommandSpec> {
    let text = String::from_utf8_lossy(name).to_ascii_lowercase();
    match text.split_once('|') {
        Some((parent, sub)) => table::lookup(parent.as_bytes())?.subcommand(sub.as_bytes()),
        None => table::lookup(name),
    }
}

/// COMMAND [COUNT | INFO name... | DOCS name... | LIST].
pub fn command(_ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    if argv.len() == 1 {
        return Frame::Array(table::available().map(|c| c.info_frame()).collect());
    }
    let sub = &argv[1];
    if eq_ignore_case(sub, "count") {
        if argv.len() != 2 {
            return Frame::error(err::arity("command|count"));
        }
        Frame::Integer(table::available().count() as i64)
    } else if eq_ignore_case(sub, "info") {
        if argv.len() == 2 {
            return Frame::Array(table::available().map(|c| c.info_frame()).collect());
        }
        Frame::Array(
            argv[2..].iter().map(|n| find_command(n).map_or(Frame::Null, |c| c.info_frame())).collect(),
        )
    } else if eq_ignore_case(sub, "docs") {
        let entries: Vec<(Frame, Frame)> = if argv.len() == 2 {
            table::available().map(|c| (bulk(c.name), c.docs_frame())).collect()
        } else {
            argv[2..].iter().filter_map(|n| find_command(n)).map(|c| (bulk(c.name), c.docs_frame())).collect()
        };
        Frame::Map(entries)
    } else if eq_ignore_case(sub, "list") {
        if argv.len() != 2 {
            return Frame::error(err::SYNTAX);
        }
        Frame::Array(table::available().map(|c| bulk(c.name)).collect())
    } else if eq_ignore_case(sub, "getkeys") {
        command_getkeys(&argv[2..])
    } else {
        Frame::error(err::unknown_subcommand(sub, "command"))
    }
}

/// COMMAND GETKEYS command arg...: the keys of a request, from the command's key positions,
/// with Redis's errors (what cluster proxies call to route a command they do not know).
fn command_getkeys(request: &[Bytes]) -> Frame {
    if request.is_empty() {
        return Frame::error(err::arity("command|getkeys"));
    }
    let Some(spec) = table::lookup(&request[0]) else {
        return Frame::error("ERR Invalid command specified");
    };
    if spec.first_key <= 0 {
        return Frame::error("ERR The command has no key arguments");
    }
    let argc = request.len() as i64;
    let arity = spec.arity as i64;
    if (arity > 0 && arity != argc) || argc < -arity {
        return Frame::error("ERR Invalid number of arguments specified for command");
    }
    Frame::Array(spec.keys(request).map(|k| Frame::Bulk(k.clone())).collect())
}

fn mark_saved(ctx: &mut Ctx<'_, '_>) {
    let mut dirty = 0;
    ctx.keys.for_each_shard(|_, s| dirty += s.dirty());
    ctx.server.dirty_at_save.store(dirty, std::sync::atomic::Ordering::Relaxed);
}

/// SAVE: a durable snapshot, under every shard's lock. Refused while a BGSAVE runs, as in
/// Redis 7; during a log rewrite it runs (and its snapshot restarts the log, which is what the
/// rewrite was for).
pub fn save(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    if ctx.server.persistence.bgsave_in_progress() {
        return Frame::error(err::BGSAVE_IN_PROGRESS);
    }
    match ctx.server.persistence.save(ctx.keys) {
        Ok(()) => {
            mark_saved(ctx);
            Frame::ok()
        }
        Err(e) => {
            tracing::error!("SAVE failed: {e}");
            Frame::error(format!("ERR {e}"))
        }
    }
}

/// `BGSAVE [SCHEDULE]`, with Redis 7's replies: refused while a BGSAVE runs; while a log
/// rewrite runs, refused without SCHEDULE and scheduled with it; inside `MULTI`/`EXEC`
/// always scheduled (Redis starts no child there).
pub fn bgsave(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    if argv.len() > 2 || (argv.len() == 2 && !eq_ignore_case(&argv[1], "schedule")) {
        return Frame::error(err::SYNTAX);
    }
    let when = if in_exec(ctx) {
        BgsaveWhen::Scheduled
    } else if argv.len() == 2 {
        BgsaveWhen::NowOrScheduled
    } else {
        BgsaveWhen::Now
    };
    match ctx.server.persistence.bgsave(ctx.keys, when) {
        Ok(BgsaveStart::Started) => {
            mark_saved(ctx);
            Frame::Simple("Background saving started".into())
        }
        Ok(BgsaveStart::Scheduled) => Frame::Simple("Background saving scheduled".into()),
        Ok(BgsaveStart::AlreadyRunning) => Frame::error(err::BGSAVE_IN_PROGRESS),
        Ok(BgsaveStart::OtherJobRunning) => Frame::error(err::BGSAVE_REWRITE_RUNNING),
        Err(e) => Frame::error(format!("ERR {e}")),
    }
}

/// Inside `EXEC` (the transaction's records are being collected).
fn in_exec(ctx: &Ctx<'_, '_>) -> bool {
    ctx.session.tx_log.is_some()
}

/// `BGREWRITEAOF`, with Redis 7's replies (scheduled while a BGSAVE runs, and inside
/// `MULTI`/`EXEC`). Every snapshot restarts the log (see `persist::disk`), so the rewrite is a
/// background snapshot: the log then holds only what was written after its start.
pub fn bgrewriteaof(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    match ctx.server.persistence.bgrewriteaof(in_exec(ctx)) {
        RewriteStart::Started => Frame::Simple("Background append only file rewriting started".into()),
        RewriteStart::Scheduled => Frame::Simple("Background append only file rewriting scheduled".into()),
        RewriteStart::AlreadyRunning => Frame::error(err::REWRITE_IN_PROGRESS),
    }
}

/// LASTSAVE.
pub fn lastsave(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    Frame::Integer(ctx.server.persistence.last_save_unix() as i64)
}

/// TIME: the server's clock as two bulk strings, Unix seconds and the microseconds within the
/// second (what scripts and clients use for a timestamp that all clients of the server share).
pub fn time(_ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(now.as_secs().to_string())),
        Frame::Bulk(Bytes::from(now.subsec_micros().to_string())),
    ])
}

/// DEBUG RELOAD: snapshot, empty, load back (spec §10).
pub fn debug(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    if eq_ignore_case(&argv[1], "reload") {
        // Inside an EXEC: the transaction's writes so far go to the log now, ahead of the
        // snapshot that holds them and of the segment it starts. Collected until the EXEC's
        // end, they would land in that new segment and be replayed over the snapshot again.
        if let Some(records) = ctx.session.tx_log.as_mut() {
            super::log_transaction(ctx.server, std::mem::take(records));
            ctx.keys.stamp_written(ctx.server.persistence.appended_lsn());
        }
        return match ctx.server.persistence.reload(ctx.keys) {
            Ok(()) => {
                mark_saved(ctx);
                Frame::ok()
            }
            Err(e) => {
                tracing::error!("DEBUG RELOAD failed: {e}");
                Frame::error("ERR Error trying to load the RDB dump, check server logs.")
            }
        };
    }
    Frame::error(err::unknown_subcommand(&argv[1], "debug"))
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: saves (unless NOSAVE), then stops the server;
/// the client gets no reply, only the closed connection, as with Redis.
pub fn shutdown(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let (mut nosave, mut save, mut force) = (false, false, false);
    for a in &argv[1..] {
        if eq_ignore_case(a, "nosave") {
            nosave = true;
        } else if eq_ignore_case(a, "save") {
            save = true;
        } else if eq_ignore_case(a, "force") {
            force = true;
        } else if eq_ignore_case(a, "now") {
        } else if eq_ignore_case(a, "abort") {
            return Frame::error("ERR No shutdown in progress.");
        } else {
            return Frame::error(err::SYNTAX);
        }
    }
    if nosave && save {
        return Frame::error(err::SYNTAX);
    }
    if !nosave {
        if let Err(e) = ctx.server.persistence.save(ctx.keys) {
            tracing::error!("SHUTDOWN: save failed: {e}");
            if !force {
                return Frame::error(err::SHUTDOWN_FAILED);
            }
        }
    }
    tracing::info!("SHUTDOWN requested by client {}", ctx.session.id);
    ctx.server.request_shutdown();
    ctx.session.after = After::CloseSilently;
    Frame::ok()
}
