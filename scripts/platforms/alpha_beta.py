"""alpha_beta.py — the alpha-beta models of the suite's all-reduce algorithms (common/coll/), on
a generated platform (sl_platform.py): the time a p-rank all-reduce of n bytes should take when
a message of m bytes between hosts a and b costs alpha(a, b) + m * beta.

alpha(a, b) is the route's latency (links crossed x link latency), so it depends on where the
partners sit: a ring's neighbours are mostly under one leaf switch, a far recursive-halving
partner is not. Each model therefore sums, step by step, the largest alpha any rank pays at that
step (the slowest pair sets the pace). The ring's steps are paced by its slowest hop once
every rank has a chunk to pass on (count >= p: a rank's exchange waits for its send to the next
rank as well as for the receive); with fewer elements than ranks (8 B) the few chunks travel
alone, once around for the reduce-scatter and once for the all-gather, paying each hop's own
latency: the mean. beta = 1 / link bandwidth. Reduction arithmetic is not counted (gamma = 0): scripts/simulate
runs the all-reduce with computation not charged, so the network is all that is timed.

The suite's algorithms cut each step's message into segments (256 KiB, coll_xfer.c) that cross
the link one after the other: a step of m bytes costs s(m) alpha + m beta, s(m) = ceil(m / seg)
(at least 1). At 8 B this is the textbook model; at 256 MiB the extra alphas are ~10%.

  ring    2(p-1) steps of n/p:   2(p-1) (s(n/p) alpha + n/p beta)       = 2(p-1) alpha + 2(p-1)/p n beta
  rhd     halving then doubling, steps of n/2, n/4, ... n/p:
                                 2 sum_k (s(m_k) alpha_k + m_k beta)    = 2 log2(p) alpha + 2(p-1)/p n beta
          (p = 2^k; otherwise the fold adds a whole-vector send before and after)
          up to 32 KiB, recursive doubling instead: log2(p) steps of the whole vector
                                 sum_k (s(n) alpha_k + n beta)          = log2(p) alpha + log2(p) n beta
  tree    binomial reduce then broadcast, whole vector per round:
                                 2 sum_k (s(n) alpha_k + n beta)        (k < ceil(log2 p))
  dbtree  two binary trees, half the vector each, pipelined in segments of c bytes: the fill
          (up and down the depth d) plus each rank's links carrying 2n in all:
                                 2 d (alpha_max + c beta) + 2 n beta
"""

import math

# Up to this many bytes the suite's rhd all-reduce runs recursive doubling of the whole vector
# instead (SLC_RHD_DOUBLING_BYTES in common/coll/coll_internal.h): log2(p) steps of n bytes.
RHD_DOUBLING_BYTES = 32 << 10


def model(coll, p, n, plat, segment=256 << 10, esize=4):
    """Predicted seconds for an all-reduce of n bytes on ranks 0..p-1 of plat (rank i on host
    i), or None for an implementation without a model (the MPI library's)."""
    beta = 1.0 / plat.bw

    def segs(m):
        return max(1, math.ceil(m / segment))
    if p == 1:
        return 0.0
    if coll == "ring":
        hops = [plat.route_latency(r, (r + 1) % p) for r in range(p)]
        alpha = max(hops) if n / esize >= p else sum(hops) / p
        return 2 * (p - 1) * (segs(n / p) * alpha + n / p * beta)
    if coll == "rhd":
        q = 1 << (p.bit_length() - 1)
        rem = p - q
        # survivors of the fold: new rank i is real rank 2i+1 (i < rem) or i + rem
        real = [2 * i + 1 if i < rem else i + rem for i in range(q)]
        steps = int(math.log2(q))
        t = 0.0
        if n <= RHD_DOUBLING_BYTES:  # small vectors: recursive doubling of the whole vector
            for k in range(steps):
                d = 1 << k
                alpha = max(plat.route_latency(real[i], real[i ^ d]) for i in range(q))
                t += segs(n) * alpha + n * beta
            if rem:
                fold = max(plat.route_latency(2 * i, 2 * i + 1) for i in range(rem))
                t += 2 * (segs(n) * fold + n * beta)
            return t
        for k in range(steps):  # halving: distance q/2 first, message n/2; doubling mirrors it
            d, m = q >> (k + 1), n / (2 << k)
            alpha = max(plat.route_latency(real[i], real[i ^ d]) for i in range(q))
            t += 2 * (segs(m) * alpha + m * beta)
        if rem:
            fold = max(plat.route_latency(2 * i, 2 * i + 1) for i in range(rem))
            t += 2 * (segs(n) * fold + n * beta)
        return t
    if coll == "tree":
        rounds = math.ceil(math.log2(p))
        t = 0.0
        for k in range(rounds):
            d = 1 << k
            worst = max((plat.route_latency(v, v + d) for v in range(0, p, 2 * d) if v + d < p),
                        default=0.0)
            t += 2 * (segs(n) * worst + n * beta)
        return t
    if coll == "dbtree":
        depth = math.ceil(math.log2(p))
        alpha_max = max(plat.route_latency(0, r) for r in range(p))
        c = min(segment, n / 2)
        return 2 * depth * (alpha_max + c * beta) + 2 * n * beta
    return None
