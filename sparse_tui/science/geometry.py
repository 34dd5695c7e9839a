"""The geometry of a learned token embedding: the view of the blog "Sparse attention 3 – inefficiency of extracting
similar content" (Ziming Liu, 2026), sections "Failure even for context length = 3" (2-D embeddings drawn directly:
"numerically closer tokens are embedded closer together") and "Dependence on embedding dimension" (larger n_embd: the
first two principal components).

Training stores each token-input run's final embedding matrix (``RunStore.log_array(run, "embed", [V, D])``, written by
the training loop when a run ends); ``reports.entries.blog3_geometry.geometry_figure``, ``sparse-tui show RUN --plot`` and the console's
Attention panel draw it through ``plane``, and say in numbers how ordered it is (``order``). numpy only: no torch,
no Textual, no matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ARRAY = "embed"  # the name the training loop stores the final token embedding under


@dataclass(frozen=True)
class Plane:
    """An embedding drawn in a plane: ``xy`` [V, 2] (row v: token v), the axes' names, and the share of the
    embedding's variance the two axes hold (1 for n_embd <= 2)."""

    xy: np.ndarray
    axes: tuple[str, str]
    explained: float


def plane(E: np.ndarray) -> Plane:
    """[V, D] -> the plane the blog draws: the embedding itself for D = 2, (e1, 0) for D = 1, the first two principal
    components of the centred rows for D > 2 (SVD). Each principal axis is signed so that token value grows along it
    (its covariance with the token index is >= 0), so runs and seeds draw alike."""
    E = np.asarray(E, dtype=np.float64)
    if E.ndim != 2 or E.shape[0] < 2:
        raise ValueError(f"an embedding is a [V, D] matrix with V >= 2, got shape {E.shape}")
    V, D = E.shape
    if D == 1:
        return Plane(np.column_stack([E[:, 0], np.zeros(V)]), ("e1", ""), 1.0)
    if D == 2:
        return Plane(E.copy(), ("e1", "e2"), 1.0)
    X = E - E.mean(axis=0)
    _, S, Vt = np.linalg.svd(X, full_matrices=False)
    xy = X @ Vt[:2].T
    v = np.arange(V) - (V - 1) / 2
    xy *= np.where(v @ xy < 0, -1.0, 1.0)
    var = S**2
    return Plane(xy, ("PC1", "PC2"), float(var[:2].sum() / var.sum()) if var.sum() > 0 else 1.0)


def _ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 of ``a``, ties sharing their mean rank (for Spearman's correlation)."""
    order = np.argsort(a, kind="stable")
    r = np.empty(len(a))
    r[order] = np.arange(len(a))
    _, inv = np.unique(a, return_inverse=True)
    return np.bincount(inv, r)[inv] / np.bincount(inv)[inv]


def order(E: np.ndarray) -> dict[str, float]:
    """How ordered an embedding is, in its full D dimensions: ``rho``, Spearman's correlation between the value
    distance |i − j| and the embedding distance ‖e_i − e_j‖ over all token pairs (1: distance grows with value
    distance; about 0: no order), and ``neighbours``, the share of tokens whose nearest other token in the
    embedding is a numerical neighbour i ± 1 (chance: about 2/(V − 1))."""
    E = np.asarray(E, dtype=np.float64)
    V = E.shape[0]
    d = np.sqrt(((E[:, None, :] - E[None, :, :]) ** 2).sum(-1))
    i, j = np.triu_indices(V, k=1)
    a, b = _ranks((j - i).astype(float)), _ranks(d[i, j])
    a, b = a - a.mean(), b - b.mean()
    den = np.sqrt((a @ a) * (b @ b))
    np.fill_diagonal(d, np.inf)
    nearest = d.argmin(axis=1)
    return {"rho": float(a @ b / den) if den > 0 else 0.0,
            "neighbours": float(np.mean(np.abs(nearest - np.arange(V)) == 1))}
