"""The attention map of one snapshot as a heatmap (rows: query position:token, columns: key token), with the
readout's relevant position (selection, arXiv 2505.17863 Fig. 17 right) and the copy step (Fig. 17 middle) marked."""

from __future__ import annotations

from rich.text import Text

from sparse_tui.tui.render.heatmap import heatmap, scale_bar


def render_attention(maps: dict, meta: dict, layer: str, head: int, example: int, width: int = 76,
                     task: str | None = None) -> tuple[Text, str]:
    """One attention map [Lq, L] (layer, head, example) as a heatmap with marks and a scale. Returns (text, info).

    Marks: ``s`` the readout's target (recall: the relevant value = selection, Fig. 17 right; linreg / nearest: the
    relevant token), ``c`` the copy target (recall: relevant value position -> its key, Fig. 17 middle)."""
    a = maps[layer]  # [H, E, Lq, L]
    H, E, Lq, L = a.shape
    head = min(head, H - 1)
    example = min(example, E - 1)
    m = a[head, example]
    off = L - Lq
    tokens = (meta.get("tokens") or [None] * E)[example] if meta.get("tokens") else None
    rel = (meta.get("relevant") or [[0] * L] * E)[example]
    marks: dict[tuple[int, int], str] = {}
    for j, r in enumerate(rel[:L]):
        if r:
            marks[(Lq - 1, j)] = "s"
    if meta.get("copy_q") is not None and meta.get("copy_k") is not None:
        cq = meta["copy_q"][example]
        ck = meta["copy_k"][example]
        if cq is not None and cq >= 0 and cq - off >= 0:
            marks[(cq - off, ck)] = "c"
    lw = 6
    cell = max(1, min(3, (width - lw - 2) // max(1, L)))
    row_labels = [f"{off + i}" + (f":{tokens[off + i]}" if tokens else "") for i in range(Lq)]
    col_labels = [str(tokens[j]) if tokens else str(j) for j in range(L)] if cell >= 2 else [""] * L
    ruler = 0 if cell >= 2 else (5 if L <= 40 else 10)  # long sequences (65 tokens): the key position every k
    body = heatmap(m.tolist(), row_labels, col_labels, vmin=0.0, vmax=1.0, cell=cell, marks=marks, ruler=ruler)
    body.append("\n")
    body.append_text(scale_bar(0.0, 1.0, width=min(20, max(8, width - 20)), label="attention"))
    body.append("   s: selection / relevant   c: copy (value → its key)" if meta.get("copy_q") is not None
                else "   s: relevant token")
    readout = m[-1]
    sel = sum(float(readout[j]) for j, r in enumerate(rel[:L]) if r)
    info = (f"{layer} · head {head + 1} of {H} · example {example + 1} of {E} · rows: query position"
            + (":token" if tokens else "") + (" · columns: key position" if ruler else " · columns: key token"
                                               if tokens else " · columns: key position"))
    info += f" · readout → relevant {sel:.2f}"
    if meta.get("copy_q") is not None:
        cq, ck = meta["copy_q"][example], meta["copy_k"][example]
        if cq - off >= 0:
            info += f" · copy {float(m[cq - off][ck]):.2f}"
    return body, info
