"""Seeded K-Means (k-means++ initialisation, cosine geometry on unit vectors)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["default_clusters", "kmeans"]


def kmeans(
    x: npt.NDArray[np.float32], k: int, *, seed: int = 0, iterations: int = 50
) -> npt.NDArray[np.int64]:
    """Cluster label of each row of ``x`` (rows L2-normalised). Deterministic for a seed."""
    n = x.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    k = max(1, min(k, n))
    rng = np.random.default_rng(seed)
    centres = [x[rng.integers(n)]]
    for _ in range(1, k):
        d = np.min(1.0 - x @ np.array(centres).T, axis=1).clip(min=0)
        total = float(d.sum())
        idx = int(rng.choice(n, p=d / total)) if total > 0 else int(rng.integers(n))
        centres.append(x[idx])
    c = np.array(centres, dtype=np.float32)
    labels = np.zeros(n, dtype=np.int64)
    for it in range(iterations):
        new = np.argmax(x @ c.T, axis=1)
        if it and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = x[labels == j]
            if len(members):
                m = members.mean(axis=0)
                norm = float(np.linalg.norm(m))
                c[j] = m / norm if norm else m
    return labels


def default_clusters(n_episodes: int) -> int:
    """FluxMem's default: max(1, floor(sqrt(n / 2)))."""
    return max(1, int((n_episodes / 2) ** 0.5))
