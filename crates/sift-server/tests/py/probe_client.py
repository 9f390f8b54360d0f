"""What redis-py's own test harness asks a server before its first test, and what it gates tests
on, run against sift-server or redis-server with the sift-redis module.

redis-py's tests/conftest.py (pytest_sessionstart) parses `INFO` with redis-py and reads
`redis_version`, `arch_bits` and `cluster_enabled` (a KeyError there aborts the whole session),
probes Redis Enterprise with DPING, and keeps `modules`; skip_ifmodversion_lt then skips a
module's tests when the version of that module in INFO is below the one they need (t-digest
tests need bf >= 2.4.0). The same checks are made here with redis-py's parsing, plus
`MODULE LIST` (redis-py's module_list()) and the INFO section arguments of Redis 7.

Run by the suite as `python3 probe_client.py <port> <protocol 2|3> <expected bf version>`;
prints `redis-py probes OK` on success and exits non-zero (with a traceback) on the first
failed check.
"""

import sys

import redis


def modversion(min_version):
    """skip_ifmodversion_lt's reading of "2.4.0": 20400."""
    return int("".join("%02d" % int(segment) for segment in min_version.split(".")))


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def main():
    port, proto, expected = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)

    # pytest_sessionstart.
    info = r.info()
    version = info["redis_version"]
    arch_bits = info["arch_bits"]
    cluster_enabled = info["cluster_enabled"]
    assert version and arch_bits in (32, 64), (version, arch_bits)
    assert cluster_enabled == 0, cluster_enabled
    try:
        r.execute_command("DPING")
        raise AssertionError("DPING answered: the harness would take this for Redis Enterprise")
    except redis.ResponseError:
        pass
    modules = info["modules"]

    # skip_ifmodversion_lt(min_version, "bf").
    bf = [m for m in modules if m.get("name") == "bf"]
    assert len(bf) == 1, modules
    ver = bf[0]["ver"]
    assert ver == expected, (ver, expected)
    assert not ver < modversion("2.4.0"), "below 2.4.0: redis-py would skip tests as for an old RedisBloom"
    assert ver < modversion("2.8.0"), "a version past the behaviour reproduced"

    # MODULE LIST, as redis-py returns it: a list of dicts.
    listed = r.module_list()
    assert len(listed) == 1, listed
    entry = {text(k): v for k, v in listed[0].items()}
    assert text(entry["name"]) == "bf" and entry["ver"] == expected, entry
    assert set(entry) == {"name", "ver", "path", "args"}, entry
    assert list(entry["args"]) == [], entry

    # The sections a monitoring client reads, by name, several at once, and the aggregates.
    for section, fields in [
        ("server", ["redis_version", "redis_mode", "process_id", "run_id", "tcp_port", "uptime_in_seconds"]),
        ("clients", ["connected_clients", "blocked_clients", "maxclients"]),
        ("memory", ["used_memory", "used_memory_rss", "maxmemory", "maxmemory_policy"]),
        ("persistence", ["loading", "rdb_changes_since_last_save", "rdb_bgsave_in_progress", "aof_enabled"]),
        ("stats", ["total_connections_received", "total_commands_processed", "rejected_connections"]),
        ("replication", ["role", "connected_slaves", "master_repl_offset"]),
        ("cpu", ["used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"]),
        ("cluster", ["cluster_enabled"]),
    ]:
        got = r.info(section)
        missing = [f for f in fields if f not in got]
        assert not missing, (section, missing, got)
    assert r.info("replication")["role"] == "master"
    assert r.info("modules")["modules"][0]["ver"] == expected
    several = r.info("server", "cluster")
    assert "redis_version" in several and "cluster_enabled" in several and "used_memory" not in several
    for aggregate in ["default", "all", "everything"]:
        got = r.info(aggregate)
        for field in ["redis_version", "used_cpu_user", "cluster_enabled", "role", "total_commands_processed"]:
            assert field in got, (aggregate, field)
    assert r.info("nosuchsection") == {}

    # CONFIG RESETSTAT starts total_commands_processed again (a few commands later, still small).
    r.config_resetstat()
    assert r.info("stats")["total_commands_processed"] <= 2

    print("redis-py probes OK")


if __name__ == "__main__":
    main()
