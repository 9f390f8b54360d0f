"""The SF.* commands from redis-py's generic `execute_command`, against sift-server or redis-server
with the module.

Run by the shared suite (`tests/suite/sf.rs`) as
`python3 sf_client.py <port> <protocol 2|3> <a sift xor file of item-0..item-299>`; prints
`redis-py SF OK` on success and exits non-zero (with a traceback) on the first failed check.
"""

import sys

import redis


def as_dict(info):
    """SF.INFO: a flat list in RESP2, a dict in RESP3."""
    if isinstance(info, dict):
        pairs = info.items()
    else:
        pairs = zip(info[::2], info[1::2])
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in pairs}


def main():
    port, proto, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    r.flushall()
    x = r.execute_command

    assert x("SF.RESERVE", "del", 0.01, 1000, "KIND", "quotient") in (b"OK", "OK", True)
    assert x("SF.ADD", "del", "a") in (1, True)
    assert [bool(v) for v in x("SF.MADD", "del", "a", "b")] == [False, True]
    assert [bool(v) for v in x("SF.MEXISTS", "del", "a", "b", "zz")] == [True, True, False]
    # A deletable kind keeps a copy per add (as CF.ADD): one SF.DEL undoes one SF.ADD.
    assert x("SF.DEL", "del", "a") in (1, True)
    assert bool(x("SF.EXISTS", "del", "a"))
    assert x("SF.DEL", "del", "a") in (1, True)
    assert not bool(x("SF.EXISTS", "del", "a"))
    assert x("SF.CARD", "del") == 1
    try:
        x("SF.RESERVE", "bad", 0.01, 100, "KIND", "bogus")
        raise AssertionError("an unknown kind was accepted")
    except redis.ResponseError as e:
        assert "unknown KIND" in str(e), e

    info = as_dict(x("SF.INFO", "del"))
    assert info["Kind"] in (b"quotient", "quotient"), info
    assert info["Items"] == 1
    assert 0 < float(info["Target error rate"]) <= 0.01
    assert float(info["Estimated error rate"]) < float(info["Target error rate"])
    assert info["Window"] is None

    with open(path, "rb") as f:
        data = f.read()
    assert x("SF.LOAD", "static", data) in (b"OK", "OK", True)
    assert [bool(v) for v in x("SF.MEXISTS", "static", "item-0", "item-299")] == [True, True]
    assert x("SF.DUMP", "static") == data
    left = None
    for off in range(0, len(data), 64):
        piece = data[off : off + 64]
        # each piece with its iterator: its end offset plus one, as SF.DUMP key <it> returns it
        left = x("SF.LOADCHUNK", "pieces", off + len(piece) + 1, piece)
    assert left == 0
    assert x("SF.DUMP", "pieces") == data
    assert x("EXPIRE", "pieces", 100) in (1, True)
    assert 0 < r.ttl("pieces") <= 100
    print("redis-py SF OK")


if __name__ == "__main__":
    main()
