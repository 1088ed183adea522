"""A threaded CPython program for the trace rows (bench/tenonbench/traces.py):
three producer threads build records and JSON text, a consumer thread parses,
sorts and indexes what they hand over through a queue, so many objects are
freed by another thread than the one that made them. Run with
PYTHONMALLOC=malloc so that object allocations reach malloc.
usage: python3 pythreads.py SCALE"""
import json
import queue
import sys
import threading


def produce(seed, rounds, out):
    for rnd in range(rounds):
        records = [{"id": i, "name": "w%d-%d-%d" % (seed, rnd, i), "tags": [str(i % 7), str(i % 11)],
                    "score": (i * 2654435761 + seed) % 1000 / 7.0} for i in range(3000)]
        out.put((records, json.dumps(records)))
    out.put(None)


def consume(inbox, producers, result):
    done, total = 0, 0
    while done < producers:
        item = inbox.get()
        if item is None:
            done += 1
            continue
        records, text = item
        back = json.loads(text)
        back.sort(key=lambda r: (r["score"], r["name"]))
        index = {}
        for r in records:
            index.setdefault(r["tags"][1], []).append(r["name"].upper())
        total += len(text) + len(back) + sum(len(v) for v in index.values())
    result.append(total)


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    inbox = queue.Queue(maxsize=8)
    result = []
    producers = [threading.Thread(target=produce, args=(s, scale, inbox)) for s in range(3)]
    consumer = threading.Thread(target=consume, args=(inbox, len(producers), result))
    for t in producers + [consumer]:
        t.start()
    for t in producers + [consumer]:
        t.join()
    print("OK pythreads checksum=%d" % result[0])


if __name__ == "__main__":
    main()
