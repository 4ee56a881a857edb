"""The evaluation protocol shared with `nlb eval` (issue 3, section 4).

The token stream (here: a file's bytes) is cut into consecutive
non-overlapping windows of `context` tokens; a shorter last window is
dropped. In each window every position but the first is predicted from the
positions before it inside the same window; PPL = exp(mean cross-entropy over
all predicted positions).
"""

import math

import torch
import torch.nn.functional as F


def windows(tokens, context: int, max_windows: int | None = None) -> torch.Tensor:
    """[K, context] int64 windows of a 1-D token sequence."""
    t = torch.as_tensor(tokens, dtype=torch.int64)
    k = t.numel() // context
    if max_windows is not None:
        k = min(k, max_windows)
    if k == 0:
        raise ValueError(f"{t.numel()} tokens do not fill one window of {context}")
    return t[: k * context].view(k, context)


def per_position_loss(logits: torch.Tensor, window_tokens: torch.Tensor) -> torch.Tensor:
    """loss[b, j] = CE(logits[b, j], tokens[b, j + 1]) for j < T - 1: [B, T - 1].

    Column j is the loss of predicting the token at position j + 1.
    """
    b, t, v = logits.shape
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, v), window_tokens[:, 1:].reshape(-1), reduction="none"
    ).view(b, t - 1)


@torch.no_grad()
def evaluate(model, tokens, context: int, max_windows: int | None = None, batch: int = 8) -> dict:
    """{"ppl", "mean_loss", "predicted_tokens", "windows", "context"} under
    the protocol, in the model's dtype; the sum of losses is accumulated in
    float64."""
    w = windows(tokens, context, max_windows)
    total = 0.0
    count = 0
    for start in range(0, w.shape[0], batch):
        chunk = w[start : start + batch]
        loss = per_position_loss(model(chunk), chunk)
        total += float(loss.double().sum())
        count += loss.numel()
    mean = total / count
    return {
        "ppl": math.exp(mean),
        "mean_loss": mean,
        "predicted_tokens": count,
        "windows": int(w.shape[0]),
        "context": context,
    }
