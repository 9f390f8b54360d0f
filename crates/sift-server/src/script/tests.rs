//! The engine's unit tests: conversions, the sandbox, limits, the script cache.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{Function, Lua, Value, Variadic};

use super::convert::{reply_within, MAX_DEPTH};
use super::*;
use crate::frame::Frame;

fn eval(vm: &mut Vm, body: &str) -> Frame {
    let (sha, f) = match vm.load(body.as_bytes()) {
        Ok((sha, s)) => (sha, s.function),
        Err(e) => return Frame::Error(e),
    };
    let raw = vm
        .lua
        .create_function(|lua, _: Variadic<Value>| Ok((1, error_table(lua, "ERR no keyspace")?)))
        .unwrap();
    let limits = RunLimits { time_limit_ms: 1000, memory_limit: crate::config::LUA_MAXMEMORY_DEFAULT };
    vm.run(&sha, f, &[Bytes::from("k")], &[Bytes::from("a"), Bytes::from("b")], raw, limits, &Arc::default())
}

fn bulk(s: &str) -> Frame {
    Frame::bulk(s.to_string())
}

#[test]
fn sha1_of_known_strings() {
    assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    assert_eq!(sha1_hex(b"return 1"), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

#[test]
fn lua_to_redis_conversions() {
    let mut vm = Vm::new().unwrap();
    assert_eq!(eval(&mut vm, "return 1"), Frame::Integer(1));
    assert_eq!(eval(&mut vm, "return 3.99"), Frame::Integer(3));
    assert_eq!(eval(&mut vm, "return -3.99"), Frame::Integer(-3));
    assert_eq!(eval(&mut vm, "return 'x'"), bulk("x"));
    assert_eq!(eval(&mut vm, "return true"), Frame::Integer(1));
    assert_eq!(eval(&mut vm, "return false"), Frame::Null);
    assert_eq!(eval(&mut vm, "return nil"), Frame::Null);
    assert_eq!(eval(&mut vm, "return"), Frame::Null);
    assert_eq!(
        eval(&mut vm, "return {1, 'a', {2.5, false}, nil, 7}"),
        Frame::Array(vec![Frame::Integer(1), bulk("a"), Frame::Array(vec![Frame::Integer(2), Frame::Null]),])
    );
    assert_eq!(eval(&mut vm, "return {ok='FINE'}"), Frame::Simple("FINE".into()));
    assert_eq!(eval(&mut vm, "return {err='MY bad'}"), Frame::error("MY bad"));
    assert_eq!(eval(&mut vm, "return redis.status_reply('PONG')"), Frame::Simple("PONG".into()));
    assert_eq!(eval(&mut vm, "return redis.error_reply('My Error')"), Frame::error("My Error"));
    assert_eq!(eval(&mut vm, "return redis.error_reply('boom')"), Frame::error("ERR boom"));
    assert_eq!(eval(&mut vm, "return redis.error_reply('-WRONG x')"), Frame::error("WRONG x"));
    assert_eq!(
        eval(&mut vm, "return {KEYS[1], ARGV[1], ARGV[2], #ARGV}"),
        Frame::Array(vec![bulk("k"), bulk("a"), bulk("b"), Frame::Integer(2)])
    );
    assert_eq!(eval(&mut vm, "return redis.sha1hex('')"), bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709"));
    // A table that contains itself is cut, not followed forever.
    let Frame::Array(mut a) = eval(&mut vm, "local t = {}; t[1] = t; return t") else { panic!() };
    let mut depth = 1;
    while let Some(Frame::Array(inner)) = a.pop() {
        a = inner;
        depth += 1;
    }
    assert!(depth >= MAX_DEPTH);
}

/// A return value whose tables share sub-tables (a cycle, or a DAG doubling at each level)
/// is a tree of exponential size when flattened into a reply; so is one string repeated
/// thousands of times. Converting it must end with an error, not run (with every shard
/// locked) until the server runs out of time or memory. The conversion charges each element
/// to a byte budget before converting it, so it stops after at most budget / size of a
/// `Frame` elements: checked with a 1 MiB budget (at most ~32k elements, milliseconds) rather
/// than the server's 512 MB (some 16 million elements, which took 35 s on a loaded machine),
/// and the accounting itself exactly, below.
#[test]
fn shared_tables_cannot_blow_up_the_reply() {
    const BUDGET: usize = 1 << 20;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let vm = Vm::new().unwrap();
        for body in [
            "local t = {} t[1] = t t[2] = t return t",
            "local a = {1} for i = 1, 64 do a = {a, a} end return a",
            "local s = string.rep('x', 1024 * 1024) local t = {} for i = 1, 4096 do t[i] = s end return t",
        ] {
            let v: Value = vm.lua.load(body).eval().unwrap();
            tx.send((body, reply_within(&v, 0, false, BUDGET))).unwrap();
        }
    });
    for _ in 0..3 {
        // Not a speed limit: a conversion that stops takes milliseconds here; the deadline
        // only turns one that never stops (2^64 elements) into a failure instead of a hang.
        let (body, r) = rx.recv_timeout(Duration::from_secs(120)).expect("the conversion stops");
        // Not assert_eq: a conversion that was not refused is gigabytes to print.
        assert!(r == Frame::error(REPLY_TOO_LARGE), "{body}: not refused");
    }
    // The accounting: a `Frame` per element plus a string's bytes. A reply of exactly the
    // budget is whole; one byte less and it is refused.
    let vm = Vm::new().unwrap();
    let v: Value = vm.lua.load("return {1, 'abc', {2}}").eval().unwrap();
    let weight = 5 * std::mem::size_of::<Frame>() + 3;
    let whole = Frame::Array(vec![Frame::Integer(1), bulk("abc"), Frame::Array(vec![Frame::Integer(2)])]);
    assert_eq!(reply_within(&v, 0, false, weight), whole);
    assert_eq!(reply_within(&v, 0, false, weight - 1), Frame::error(REPLY_TOO_LARGE));
    // Under the server's budget, large replies that fit are still whole.
    let mut vm = Vm::new().unwrap();
    let Frame::Array(a) = eval(&mut vm, "local t = {} for i = 1, 100000 do t[i] = {i, 'x'} end return t")
    else {
        panic!()
    };
    assert_eq!(a.len(), 100000);
}

/// One VM serves every client: nothing a script does to the shared tables (`redis`, the
/// libraries, `_G`, their metatables, the globals table itself) may reach the next script,
/// or one client could forge `redis.call`'s answers for all others.
#[test]
fn scripts_cannot_change_what_later_scripts_see() {
    let mut vm = Vm::new().unwrap();
    for body in [
        "redis.call = function() return 'forged' end",
        "rawset(redis, 'pcall', function() return 'forged' end)",
        "rawset(_G, 'leak', 1)",
        "rawset(_G, 'redis', {pcall = function() return 'forged' end})",
        "string.len = function() return 7 end",
        "getmetatable('').__index = {len = function() return 7 end}",
        "getmetatable(_G).__index = nil getmetatable(_G).__newindex = nil",
        "setmetatable(_G, nil)",
        "setfenv(0, {redis = {pcall = function() return 'forged' end}})",
        "math.floor = nil table.concat = nil coroutine.resume = nil",
        // An __eq planted on a shared metatable must not run (unbounded) in the check.
        "local loop = function() while true do end end getmetatable(_G).__eq = loop \
         rawset(_G, '_G', setmetatable({}, {__eq = loop}))",
        "getmetatable('').__eq = function() while true do end end \
         rawset(_G, 'string', setmetatable({}, getmetatable('')))",
    ] {
        let _ = eval(&mut vm, body);
    }
    assert_eq!(eval(&mut vm, "return redis.pcall('GET', 'x')"), Frame::error("ERR no keyspace"));
    let Frame::Error(e) = eval(&mut vm, "return redis.call('GET', 'x')") else { panic!() };
    assert!(e.starts_with("ERR no keyspace"), "{e}");
    assert_eq!(
        eval(&mut vm, "return {('abc'):len(), string.len('abcd')}"),
        Frame::Array(vec![Frame::Integer(3), Frame::Integer(4)])
    );
    assert_eq!(eval(&mut vm, "return math.floor(2.5) .. table.concat({1, 2})"), bulk("212"));
    let Frame::Error(e) = eval(&mut vm, "return leak") else { panic!("a global leaked") };
    assert!(e.contains("nonexistent global variable 'leak'"), "{e}");
    let Frame::Error(e) = eval(&mut vm, "x = 1") else { panic!("globals became writable") };
    assert!(e.contains("Attempt to modify a readonly table"), "{e}");
    // The same script run twice: what it stored with rawset is not kept either.
    let body = "local n = (rawget(_G, 'n') or 0) + 1 rawset(_G, 'n', n) return n";
    assert_eq!(eval(&mut vm, body), Frame::Integer(1));
    assert_eq!(eval(&mut vm, body), Frame::Integer(1));
}

/// Lua 5.1 loads precompiled chunks given to `loadstring` / `load`, and malformed bytecode
/// reads and writes memory at will (Redis's CVE-2015-4335): text only.
#[test]
fn bytecode_is_refused() {
    let mut vm = Vm::new().unwrap();
    for loader in [
        "loadstring(string.dump(function() return 1 end))",
        "load((function() local s, i = string.dump(function() return 1 end), 0 \
         return function() i = i + 1 if i == 1 then return s end end end)())",
    ] {
        assert_eq!(eval(&mut vm, &format!("return type(({loader}))")), bulk("nil"), "{loader}");
    }
    assert_eq!(eval(&mut vm, "return loadstring('return 2')()"), Frame::Integer(2));
}

#[test]
fn redis_to_lua_conversions() {
    let lua = Lua::new();
    let check = |f: Frame, expect: &str| {
        let v = frame_to_lua(&lua, &f, false).unwrap();
        let show: Function = lua
            .load(
                r#"local function show(v)
                     if type(v) ~= 'table' then return type(v) .. ':' .. tostring(v) end
                     if v.ok then return 'ok:' .. v.ok end
                     if v.err then return 'err:' .. v.err end
                     local out = {}
                     for i = 1, #v do out[i] = show(v[i]) end
                     return '[' .. table.concat(out, ',') .. ']'
                   end
                   return show"#,
            )
            .eval()
            .unwrap();
        assert_eq!(show.call::<String>(v).unwrap(), expect);
    };
    check(Frame::Integer(5), "number:5");
    check(Frame::bulk("x"), "string:x");
    check(Frame::Null, "boolean:false");
    check(Frame::NullArray, "boolean:false");
    check(Frame::ok(), "ok:OK");
    check(Frame::error("WRONGTYPE Operation against a key"), "err:WRONGTYPE Operation against a key");
    check(Frame::error("oops"), "err:ERR oops");
    check(
        Frame::Array(vec![Frame::Integer(1), Frame::Array(vec![Frame::bulk("a")])]),
        "[number:1,[string:a]]",
    );
    check(Frame::Map(vec![(Frame::bulk("k"), Frame::Integer(2))]), "[string:k,number:2]");
    check(Frame::Double(1.5), "string:1.5");
    check(Frame::Boolean(true), "number:1");
    check(Frame::Set(vec![Frame::bulk("m")]), "[string:m]");
}

#[test]
fn errors_compile_runtime_and_sandbox() {
    let mut vm = Vm::new().unwrap();
    let Frame::Error(e) = eval(&mut vm, "return (") else { panic!() };
    assert!(e.starts_with("ERR Error compiling script (new function): user_script:1:"), "{e}");
    let sha = sha1_hex(b"error('boom')");
    assert_eq!(
        eval(&mut vm, "error('boom')"),
        Frame::error(format!("ERR user_script:1: boom script: {sha}, on @user_script:1."))
    );
    let body = "\nreturn redis.call('GET', 'x')";
    assert_eq!(
        eval(&mut vm, body),
        Frame::error(format!("ERR no keyspace script: {}, on @user_script:2.", sha1_hex(body.as_bytes())))
    );
    // redis.pcall returns the error table instead of raising it.
    assert_eq!(eval(&mut vm, "return redis.pcall('GET', 'x')"), Frame::error("ERR no keyspace"));
    // Lua's pcall around redis.call gives the script Redis's error table.
    assert_eq!(
        eval(&mut vm, "local ok, e = pcall(redis.call, 'GET', 'x'); return {ok and 1 or 0, e.err}"),
        Frame::Array(vec![Frame::Integer(0), bulk("ERR no keyspace")])
    );
    let Frame::Error(e) = eval(&mut vm, "x = 1") else { panic!() };
    assert!(e.starts_with("ERR user_script:1: Attempt to modify a readonly table"), "{e}");
    let Frame::Error(e) = eval(&mut vm, "return undefined_thing") else { panic!() };
    assert!(e.contains("Script attempted to access nonexistent global variable 'undefined_thing'"), "{e}");
    for lib in ["os", "io", "package", "debug", "dofile", "loadfile"] {
        let Frame::Error(e) = eval(&mut vm, &format!("return {lib}")) else { panic!("{lib} exists") };
        assert!(e.contains("nonexistent global"), "{e}");
    }
    assert_eq!(eval(&mut vm, "return loadstring('return 2')()"), Frame::Integer(2));
    assert_eq!(
        eval(&mut vm, "return string.rep('a', 3) .. table.concat({1,2}) .. math.floor(2.5)"),
        bulk("aaa122")
    );
    // Bytecode is refused: `bytecode_is_refused`.
}

#[test]
fn runaway_scripts_are_aborted_even_through_pcall() {
    let mut vm = Vm::new().unwrap();
    let limits = RunLimits { time_limit_ms: 50, memory_limit: crate::config::LUA_MAXMEMORY_DEFAULT };
    for body in [
        "while true do end",
        "while true do pcall(function() while true do end end) end",
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
    ] {
        let (sha, f) = vm.load(body.as_bytes()).map(|(h, s)| (h, s.function)).unwrap();
        let raw = vm.lua.create_function(|_, ()| Ok(0)).unwrap();
        let t = Instant::now();
        let reply = vm.run(&sha, f, &[], &[], raw, limits, &Arc::default());
        assert_eq!(
            reply,
            Frame::error("ERR Script aborted: it ran longer than busy-reply-threshold (50 ms)"),
            "{body}"
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{body}");
    }
    // The VM still works afterwards.
    assert_eq!(eval(&mut vm, "return 1"), Frame::Integer(1));
}

/// A loop of slow library calls runs few instructions per call: with the clock checked
/// every 100 000 instructions (Redis's count), `string.rep` of 4 MB (~1 ms) in a loop saw the
/// limit every ~25 s; every 1 000 it is ~0.25 s. The bound is in units of one such call,
/// timed in the same run (a loaded machine stretches both alike): at most 2 000 calls past
/// the limit, where the 100 000-instruction check allowed ~25 000.
#[test]
fn slow_library_calls_do_not_outrun_the_time_limit() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut vm = Vm::new().unwrap();
        let body = b"for i = 1, 1e9 do local s = string.rep('x', 4 * 1024 * 1024) end";
        let (sha, f) = vm.load(body).map(|(h, s)| (h, s.function)).unwrap();
        let raw = vm.lua.create_function(|_, ()| Ok(0)).unwrap();
        // One call's time, now: 20 calls without a limit.
        let calls = b"for i = 1, 20 do local s = string.rep('x', 4 * 1024 * 1024) end";
        let (csha, cf) = vm.load(calls).map(|(h, s)| (h, s.function)).unwrap();
        let unlimited = RunLimits { time_limit_ms: 0, memory_limit: crate::config::LUA_MAXMEMORY_DEFAULT };
        let t = Instant::now();
        let done = vm.run(&csha, cf, &[], &[], raw.clone(), unlimited, &Arc::default());
        assert_eq!(done, Frame::Null);
        let per_call = t.elapsed() / 20;
        let limits = RunLimits { time_limit_ms: 100, memory_limit: crate::config::LUA_MAXMEMORY_DEFAULT };
        let t = Instant::now();
        let reply = vm.run(&sha, f, &[], &[], raw, limits, &Arc::default());
        tx.send((reply, t.elapsed(), per_call)).unwrap();
    });
    let (reply, took, per_call) =
        rx.recv_timeout(Duration::from_secs(120)).expect("the script is aborted in time");
    assert_eq!(reply, Frame::error("ERR Script aborted: it ran longer than busy-reply-threshold (100 ms)"));
    let bound = Duration::from_millis(100) + per_call * 2_000;
    assert!(took < bound, "took {took:?}, one call {per_call:?}, bound {bound:?}");
}

#[test]
fn memory_limit_gives_a_clean_error() {
    let mut vm = Vm::new().unwrap();
    let (sha, f) = vm
        .load(b"local t = {} for i = 1, 1e8 do t[i] = string.rep('x', 100) .. i end return #t")
        .map(|(h, s)| (h, s.function))
        .unwrap();
    let raw = vm.lua.create_function(|_, ()| Ok(0)).unwrap();
    let limits = RunLimits { time_limit_ms: 0, memory_limit: 8 * 1024 * 1024 };
    let Frame::Error(e) = vm.run(&sha, f, &[], &[], raw, limits, &Arc::default()) else { panic!() };
    assert!(e.contains("not enough memory"), "{e}");
    assert_eq!(eval(&mut vm, "return 1"), Frame::Integer(1));
}

#[test]
fn resp3_conversions() {
    let mut vm = Vm::new().unwrap();
    assert_eq!(eval(&mut vm, "return {double=3.5}"), Frame::Double(3.5));
    assert_eq!(eval(&mut vm, "return {double=3}"), Frame::Double(3.0));
    assert_eq!(eval(&mut vm, "return {map={a=1}}"), Frame::Map(vec![(bulk("a"), Frame::Integer(1))]));
    assert_eq!(eval(&mut vm, "return {set={x=true}}"), Frame::Set(vec![bulk("x")]));
    assert_eq!(
        eval(&mut vm, "return {big_number='123456789012345678901234567890'}"),
        bulk("123456789012345678901234567890")
    );
    assert_eq!(
        eval(&mut vm, "return {verbatim_string={format='txt', string='v'}}"),
        Frame::Verbatim("v".into())
    );
    assert_eq!(eval(&mut vm, "redis.setresp(3) return true"), Frame::Boolean(true));
    assert_eq!(eval(&mut vm, "redis.setresp(3) return false"), Frame::Boolean(false));
    assert_eq!(eval(&mut vm, "return false"), Frame::Null, "each run starts in RESP2");
    let Frame::Error(e) = eval(&mut vm, "redis.setresp(4)") else { panic!() };
    assert!(e.starts_with("ERR RESP version must be 2 or 3."), "{e}");
    let lua = Lua::new();
    let show: Function = lua
        .load(
            r#"local function show(v)
                 if type(v) ~= 'table' then return type(v) .. ':' .. tostring(v) end
                 if v.double then return 'double:' .. v.double end
                 if v.map then local n = 0 for k, x in pairs(v.map) do n = n + 1 end return 'map:' .. n .. ':' .. show(v.map.k) end
                 if v.set then return 'set:' .. tostring(v.set.m) end
                 if v.verbatim_string then return 'verb:' .. v.verbatim_string.string end
                 return '?'
               end
               return show"#,
        )
        .eval()
        .unwrap();
    let check = |f: Frame, expect: &str| {
        let v = frame_to_lua(&lua, &f, true).unwrap();
        assert_eq!(show.call::<String>(v).unwrap(), expect);
    };
    check(Frame::Double(1.5), "double:1.5");
    check(Frame::Map(vec![(Frame::bulk("k"), Frame::Integer(2))]), "map:1:number:2");
    check(Frame::Set(vec![Frame::bulk("m")]), "set:true");
    check(Frame::Boolean(false), "boolean:false");
    check(Frame::Null, "nil:nil");
    check(Frame::Verbatim("t".into()), "verb:t");
}

#[test]
fn shebang_flags() {
    assert_eq!(parse_shebang(b"return 1"), Ok(None));
    assert_eq!(parse_shebang(b"#!lua\nreturn 1"), Ok(Some(false)));
    assert_eq!(parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1"), Ok(Some(true)));
    assert_eq!(parse_shebang(b"#!js\n").unwrap_err(), "ERR Unexpected engine in script shebang: #!js");
    assert_eq!(parse_shebang(b"#!lua name=x\n").unwrap_err(), "ERR Unknown lua shebang option: name=x");
    assert_eq!(
        parse_shebang(b"#!lua flags=bad\n").unwrap_err(),
        "ERR Unexpected flag in script shebang: bad"
    );
    let mut vm = Vm::new().unwrap();
    // Line numbers are the script's own.
    let body = "#!lua\nerror('x')";
    assert_eq!(
        eval(&mut vm, body),
        Frame::error(format!(
            "ERR user_script:2: x script: {}, on @user_script:2.",
            sha1_hex(body.as_bytes())
        ))
    );
}

#[test]
fn numbers_as_command_arguments() {
    let arg = |v: Value| value_to_arg(&v).map(|b| String::from_utf8(b.to_vec()).unwrap());
    // C's %.17g, as redis-server 7.0.15 (the fixture test checks it against the recording).
    assert_eq!(arg(Value::Number(0.1)).as_deref(), Some("0.10000000000000001"));
    assert_eq!(arg(Value::Number(3.0)).as_deref(), Some("3"));
    assert_eq!(arg(Value::Integer(-7)).as_deref(), Some("-7"));
    assert_eq!(arg(Value::Number(1e14)).as_deref(), Some("100000000000000"));
    assert_eq!(arg(Value::Integer(100_000_000_000_000_000)).as_deref(), Some("1e+17"));
    assert_eq!(arg(Value::Number(1e-7)).as_deref(), Some("9.9999999999999995e-08"));
    assert_eq!(arg(Value::Number(-f64::NAN)).as_deref(), Some("-nan"));
    assert_eq!(arg(Value::Boolean(true)), None);
    assert_eq!(arg(Value::Nil), None);
}

/// mlua holds every Lua value Rust code keeps (a table being filled, a string to return) in
/// one auxiliary stack of at most 8000 slots for the whole VM, and panics past it. The
/// libraries' decoders hold one per nesting level (two in a map: the table and its key) and
/// one per string or table they return: deep maps and thousands of returned strings, which
/// Redis decodes, answer an error here instead of panicking (the VM goes on working).
#[test]
fn library_results_stay_within_mluas_reference_stack() {
    // Scripts run on the server's runtime workers, whose stacks are 8 MiB.
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(library_results_stay_within_mluas_reference_stack_on_a_worker_stack)
        .unwrap()
        .join()
        .unwrap();
}

fn library_results_stay_within_mluas_reference_stack_on_a_worker_stack() {
    let mut vm = Vm::new().unwrap();
    let cases = [
        // Maps nested in values under string keys, and in keys.
        "string.rep(string.char(0x81, 0xa1, 0x61), 3990) .. string.char(0xc0)",
        "string.rep(string.char(0x81, 0x80), 3990) .. string.char(0xc0)",
        "string.rep(string.char(0x81), 7990) .. string.char(0x01, 0xc0) .. string.rep(string.char(0x01), 7990)",
    ];
    for s in cases {
        let body = format!("local ok, e = pcall(cmsgpack.unpack, {s}) return {{tostring(ok), e}}");
        match eval(&mut vm, &body) {
            Frame::Array(v) if v.first() == Some(&bulk("false")) => {}
            other => panic!("{s}: {other:?}"),
        }
    }
    for body in [
        "return select('#', cmsgpack.unpack(string.rep(string.char(0xa1, 0x61), 7900)))",
        "return select('#', cmsgpack.unpack(string.rep(string.char(0x90), 7900)))",
        "return select('#', struct.unpack(string.rep('c1', 7900), string.rep('a', 7900)))",
    ] {
        let body = format!("local ok, e = pcall(function() {body} end) return {{tostring(ok), e}}");
        match eval(&mut vm, &body) {
            Frame::Array(v) if v.first() == Some(&bulk("false")) => {}
            other => panic!("{body}: {other:?}"),
        }
    }
    // Below the bound, as many as Redis returns.
    let many = "return select('#', cmsgpack.unpack(string.rep(string.char(0xa1, 0x61), 3000)))";
    assert_eq!(eval(&mut vm, many), Frame::Integer(3000));
    assert_eq!(
        eval(&mut vm, "return cjson.encode(cmsgpack.unpack(string.char(0x81, 0xa1, 0x61, 1)))"),
        bulk("{\"a\":1}")
    );
}

/// Redis caches any number of scripts. Each cached one held as an mlua `Function` took a
/// slot of mlua's 8000-slot reference stack (see `crate::lualib::MAX_REFS`) for as long as
/// it was cached: past about 7700 scripts, loading or running any script panicked.
#[test]
fn thousands_of_cached_scripts() {
    let mut vm = Vm::new().unwrap();
    for i in 0..9000 {
        vm.load(format!("return {i}").as_bytes()).unwrap();
    }
    assert_eq!(vm.len(), 9000);
    assert_eq!(eval(&mut vm, "return 8999 + 1"), Frame::Integer(9000));
    let s = vm.get(&sha1_hex(b"return 4711")).unwrap();
    assert_eq!(s.shebang, None);
    assert_eq!(s.function.call::<i64>(()).unwrap(), 4711);
}
