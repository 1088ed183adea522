"""A real program under each allocator: CPython doing ordinary work (dicts,
strings, lists, JSON round trips, sorting). run.py starts it with
PYTHONMALLOC=malloc so that every object allocation goes to the preloaded
malloc instead of CPython's own small-object arena.
usage: python3 pyprog.py SCALE"""
import json
import sys


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    checksum = 0
    for rnd in range(scale):
        records = [{"id": i, "name": "item-%d-%d" % (rnd, i), "tags": [str(i % 7), str(i % 11)],
                    "score": (i * 2654435761) % 1000 / 7.0} for i in range(5000)]
        text = json.dumps(records)
        back = json.loads(text)
        back.sort(key=lambda r: (r["score"], r["name"]))
        index = {}
        for r in back:
            index.setdefault(r["tags"][0], []).append(r["name"].upper())
        words = " ".join(r["name"] for r in back).split("-")
        checksum += len(text) + len(words) + sum(len(v) for v in index.values())
    print("OK pyprog checksum=%d" % checksum)


if __name__ == "__main__":
    main()
