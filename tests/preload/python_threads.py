"""Allocation-heavy Python work whose printed results are deterministic:
threads building and hashing containers, json and zlib round trips, sqlite,
and a multiprocessing pool forked while other threads are busy."""
import hashlib
import json
import multiprocessing
import queue
import sqlite3
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor


def churn(seed):
    """Builds, mutates and digests nested containers of many sizes."""
    x = seed * 2654435761 % 2**32
    table = {}
    items = []
    for i in range(30000):
        x = (x * 1103515245 + 12345) % 2**31
        key = "k%d" % (x % 5000)
        table.setdefault(key, []).append("v" * (x % 200) + str(i))
        if x % 7 == 0:
            items.append(bytes(x % 1000))
        if x % 11 == 0 and table:
            table.pop(key, None)
    blob = json.dumps(sorted(table.items()), separators=(",", ":")).encode()
    packed = zlib.compress(blob, 6)
    assert zlib.decompress(packed) == blob
    h = hashlib.sha256(blob)
    for item in items:
        h.update(item)
    return h.hexdigest()


def square_digest(n):
    return hashlib.md5(str([i * i for i in range(n)]).encode()).hexdigest()


def main():
    results = [None] * 8
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, churn(i))) for i in range(8)]
    for t in threads:
        t.start()
    # Fork a pool while those threads allocate.
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        forked = pool.map(square_digest, [1000, 20000, 50000, 3])
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        print("thread", i, r)
    print("pool", " ".join(forked))

    # Producer/consumer through a queue: objects made in one thread, dropped in another.
    q = queue.Queue(maxsize=100)
    out = []

    def producer():
        for i in range(20000):
            q.put({"i": i, "s": "x" * (i % 300), "l": list(range(i % 50))})
        q.put(None)

    def consumer():
        total = 0
        while (item := q.get()) is not None:
            total += item["i"] + len(item["s"]) + sum(item["l"])
        out.append(total)

    ts = [threading.Thread(target=producer), threading.Thread(target=consumer)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("queue", out[0])

    with ThreadPoolExecutor(max_workers=4) as ex:
        print("executor", " ".join(ex.map(churn, range(100, 104))))

    db = sqlite3.connect(":memory:")
    db.execute("create table t (k integer, v text)")
    db.executemany("insert into t values (?, ?)", ((i, "row%d" % (i * 7 % 1000)) for i in range(50000)))
    print("sqlite", db.execute("select count(distinct v), sum(k), max(v) from t").fetchone())


if __name__ == "__main__":
    main()
