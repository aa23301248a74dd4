"""Embedding throughput of the offline embedders on LoCoMo turns, measured in one process
so the figures compare under the same load: texts per wall-clock second and per CPU second
(the process's CPU time over all its threads, which a loaded machine does not inflate).

    python benchmarks/embedder_throughput.py locomo_dev.json --n 400 --embedders wordllama,minilm

Texts are the turns as the pipeline indexes them with one neighbour on each side
("Speaker: text" and the neighbours' text), in order; each embedder gets the same texts,
in batches of 64 as ``Embedder.embed`` forms them. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from lightmem.config import build_embedder, parse_config
from lightmem.ledger import Ledger
from lightmem.types import entry_search_text


def texts_of(path: str, n: int) -> list[str]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out: list[str] = []
    for sample in data:
        conv = sample["conversation"]
        sessions = sorted(
            (k for k in conv if k.startswith("session_") and not k.endswith("date_time")),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in sessions:
            turns = conv[key]
            for i, t in enumerate(turns):
                context = "\n".join(u["text"] for u in turns[max(0, i - 1) : i + 2] if u is not t)
                out.append(entry_search_text(t["speaker"], t["text"], context))
                if len(out) == n:
                    return out
    return out


def measure(name: str, texts: list[str]) -> dict[str, float | int | str]:
    emb = build_embedder(parse_config({"text_embedder": {"model_name": name}}), Ledger())
    emb.embed(texts[:8])  # load the model outside the measurement
    wall, cpu = time.perf_counter(), time.process_time()
    emb.embed(texts)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "embedder": emb.name,
        "texts": len(texts),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "texts_per_s": round(len(texts) / wall, 1),
        "texts_per_cpu_s": round(len(texts) / cpu, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--embedders", default="wordllama,minilm")
    args = ap.parse_args()
    texts = texts_of(args.file, args.n)
    rows = [measure(name, texts) for name in args.embedders.split(",")]
    print(
        json.dumps(
            {
                "load_average": os.getloadavg(),
                "cpus": os.cpu_count(),
                "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
                "results": rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
