"""Plain-PyTorch reference of S–D attention and ELU+1 linear attention
(PAPERS §B2, §B3; docs/attention.md). dtype-agnostic: every module computes in
the dtype of its parameters (float32 for training, float64 for fixtures).

Interface (kept stable; the tiny S–D model and the C++ fixtures build on it)
---------------------------------------------------------------------------
``rank`` everywhere is the routing rank 2r (even), the C++ template argument
``Rank``; U and V have r = rank // 2 columns.

``SDAttention(d, n_head, rank, filter="diagonal"|"scalar")``, an nn.Module:
  parameters (state_dict names, shapes, layout):
    u               [H, d, r]   routing factor U_h of head h
    v               [H, d, r]   routing factor V_h of head h
    theta           [H, d]      filter="diagonal": D_h = diag(softplus(theta[h]))
                    [H]         filter="scalar":   D_h = softplus(theta[h]) * I
    c_v.weight      [d, d]      values V = x @ c_v.weight + c_v.bias   (x W layout)
    c_v.bias        [d]
    c_proj.weight   [d, d]      output Y = C @ c_proj.weight + c_proj.bias
    c_proj.bias     [d]
  forward(x) with x [..., T, d] (any leading batch dims) returns Y [..., T, d]:
    S_h = U_h V_hᵀ − V_h U_hᵀ                        (skew-symmetric, rank ≤ 2r)
    logits_h[i, j] = x_i (S_h − D_h) x_jᵀ / sqrt(d_h)   for j ≤ i (causal), d_h = d / H
    P_h = softmax_j(logits_h)
    C[:, h·d_h:(h+1)·d_h] = P_h @ V[:, h·d_h:(h+1)·d_h]
    Y = C @ c_proj.weight + c_proj.bias
  "residual-space policy" (ours): S and D act on the d-dim input x itself; there
  are no query/key projections and no biases inside the scores.
  Helpers: logits(x) -> [..., H, T, T] (masked entries = -inf),
  routing_matrices() -> [H, d, d], filter_diagonals() -> [H, d],
  reset_parameters(generator=None, std=0.02, theta_init=0.0).

``SkewRouting(d, rank)`` and ``DiagonalFilter(d)`` / ``ScalarFilter()``: one head's
routing and filter as standalone modules (scores(x) -> [..., T, T], dense(),
diagonal(d)); the same functions SDAttention uses.

``LinearAttentionReference``: causal ELU+1 linear attention (PAPERS §B3),
  out_i = φ(q_i)ᵀ Σ_{j≤i} φ(k_j) v_jᵀ / (φ(q_i)ᵀ Σ_{j≤i} φ(k_j)),  φ(u) = elu(u) + 1,
  on one head's raw q, k, v [..., T, d_h] (no 1/sqrt(d_h) scale: ours), in two
  independent forms: quadratic(q, k, v) (the T x T weight matrix, masked and
  row-normalised) and prefix_sum(q, k, v) (running sums, O(T d_h²)).
"""

import math

import torch
from torch import nn

from .models import Conv1D  # y = x W + b with weight [in, out] (GPT-2's layout)


def softplus(t: torch.Tensor) -> torch.Tensor:
    """log(1 + e^t) without overflow and without torch's threshold shortcut:
    max(t, 0) + log1p(exp(-|t|)), exact to rounding for every finite t."""
    return torch.clamp(t, min=0) + torch.log1p(torch.exp(-torch.abs(t)))


def elu_feature(u: torch.Tensor) -> torch.Tensor:
    """φ(u) = elu(u) + 1: u + 1 for u > 0, exp(u) otherwise (always > 0)."""
    return torch.where(u > 0, u + 1, torch.exp(torch.clamp(u, max=0)))


def skew_scores(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """x S xᵀ with S = U Vᵀ − V Uᵀ in low-rank form: (x U)(x V)ᵀ − (x V)(x U)ᵀ.
    x [..., T, d], u, v [..., d, r] (broadcast) -> [..., T, T]."""
    xu = torch.matmul(x, u)
    xv = torch.matmul(x, v)
    return torch.matmul(xu, xv.transpose(-1, -2)) - torch.matmul(xv, xu.transpose(-1, -2))


def causal_mask(scores: torch.Tensor) -> torch.Tensor:
    """Sets entries j > i of the last two dims to -inf."""
    t = scores.shape[-1]
    allowed = torch.ones(t, t, dtype=torch.bool, device=scores.device).tril()
    return scores.masked_fill(~allowed, float("-inf"))


def _check_rank(rank: int) -> int:
    if rank <= 0 or rank % 2 != 0:
        raise ValueError(f"routing rank must be a positive even number (2r), found {rank}")
    return rank // 2


class SkewRouting(nn.Module):
    """One head's routing S = U Vᵀ − V Uᵀ, u, v [d, rank // 2]."""

    def __init__(self, d: int, rank: int):
        super().__init__()
        r = _check_rank(rank)
        self.u = nn.Parameter(torch.empty(d, r))
        self.v = nn.Parameter(torch.empty(d, r))
        nn.init.normal_(self.u, std=0.02)
        nn.init.normal_(self.v, std=0.02)

    def dense(self) -> torch.Tensor:  # [d, d]
        return self.u @ self.v.T - self.v @ self.u.T

    def scores(self, x: torch.Tensor) -> torch.Tensor:  # [..., T, T], not masked
        return skew_scores(x, self.u, self.v)


class DiagonalFilter(nn.Module):
    """One head's filter D = diag(softplus(theta)), theta [d]."""

    def __init__(self, d: int):
        super().__init__()
        self.theta = nn.Parameter(torch.zeros(d))

    def diagonal(self, d: int | None = None) -> torch.Tensor:  # [d]
        return softplus(self.theta)

    def scores(self, x: torch.Tensor) -> torch.Tensor:  # x D xᵀ [..., T, T]
        return torch.matmul(x * self.diagonal(), x.transpose(-1, -2))


class ScalarFilter(nn.Module):
    """One head's filter D = softplus(theta) I, theta a scalar."""

    def __init__(self):
        super().__init__()
        self.theta = nn.Parameter(torch.zeros(()))

    def diagonal(self, d: int) -> torch.Tensor:  # [d]
        return softplus(self.theta).expand(d)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return softplus(self.theta) * torch.matmul(x, x.transpose(-1, -2))


class SDAttention(nn.Module):
    """Multi-head causal S–D attention; see the module docstring."""

    def __init__(self, d: int, n_head: int, rank: int, filter: str = "diagonal"):
        super().__init__()
        if n_head <= 0 or d % n_head != 0:
            raise ValueError(f"n_head must be a positive divisor of d = {d}, found {n_head}")
        if filter not in ("diagonal", "scalar"):
            raise ValueError(f"filter must be 'diagonal' or 'scalar', found {filter!r}")
        r = _check_rank(rank)
        self.d, self.n_head, self.head_dim, self.rank, self.filter = d, n_head, d // n_head, rank, filter
        self.u = nn.Parameter(torch.empty(n_head, d, r))
        self.v = nn.Parameter(torch.empty(n_head, d, r))
        self.theta = nn.Parameter(torch.zeros(n_head, d) if filter == "diagonal" else torch.zeros(n_head))
        self.c_v = Conv1D(d, d)
        self.c_proj = Conv1D(d, d)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None, std: float = 0.02,
                         theta_init: float = 0.0):
        for p in (self.u, self.v, self.c_v.weight, self.c_proj.weight):
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * std)
        self.c_v.bias.zero_()
        self.c_proj.bias.zero_()
        self.theta.fill_(theta_init)

    def filter_diagonals(self) -> torch.Tensor:  # [H, d]
        dvec = softplus(self.theta)
        return dvec if self.filter == "diagonal" else dvec[:, None].expand(self.n_head, self.d)

    def routing_matrices(self) -> torch.Tensor:  # [H, d, d]
        return self.u @ self.v.transpose(-1, -2) - self.v @ self.u.transpose(-1, -2)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., T, d] -> [..., H, T, T]: x_i (S_h − D_h) x_jᵀ / sqrt(d_h), -inf for j > i."""
        xh = x.unsqueeze(-3)  # [..., 1, T, d]
        routing = skew_scores(xh, self.u, self.v)  # [..., H, T, T]
        filt = torch.matmul(xh * self.filter_diagonals()[:, None, :], xh.transpose(-1, -2))
        return causal_mask((routing - filt) / math.sqrt(self.head_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[-2]
        lead = x.shape[:-2]
        values = self.c_v(x).reshape(*lead, t, self.n_head, self.head_dim).transpose(-2, -3)
        p = torch.softmax(self.logits(x), dim=-1)  # [..., H, T, T]
        ctx = torch.matmul(p, values)  # [..., H, T, d_h]
        return self.c_proj(ctx.transpose(-2, -3).reshape(*lead, t, self.d))


class LinearAttentionReference:
    """Causal ELU+1 linear attention on one head's q, k, v [..., T, d_h]."""

    @staticmethod
    def quadratic(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The T x T form: A_ij = φ(q_i)·φ(k_j) for j ≤ i, 0 otherwise; out = (A / rowsum A) v."""
        a = torch.matmul(elu_feature(q), elu_feature(k).transpose(-1, -2))
        a = torch.tril(a)
        return torch.matmul(a / a.sum(dim=-1, keepdim=True), v)

    @staticmethod
    def prefix_sum(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Running sums S_i = Σ_{j≤i} φ(k_j) v_jᵀ [d_h, d_v], z_i = Σ_{j≤i} φ(k_j); O(T d_h²)."""
        fq, fk = elu_feature(q), elu_feature(k)
        kv = torch.cumsum(fk.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # [..., T, d_h, d_v]
        z = torch.cumsum(fk, dim=-2)  # [..., T, d_h]
        num = torch.matmul(fq.unsqueeze(-2), kv).squeeze(-2)
        den = (fq * z).sum(dim=-1, keepdim=True)
        return num / den
