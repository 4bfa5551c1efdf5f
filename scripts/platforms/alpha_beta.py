"""alpha_beta.py — the alpha-beta models of the suite's all-reduce algorithms (common/coll/), on
a generated platform (sl_platform.py): the time a p-rank all-reduce of n bytes should take when
a message of m bytes between hosts a and b costs alpha(a, b) + m * beta.

alpha(a, b) is the route's latency (links crossed x link latency), so it depends on where the
partners sit: a ring's neighbours are mostly under one leaf switch, a far recursive-halving
partner is not. Each model therefore sums, step by step, the largest alpha any rank pays at that
step (the slowest pair sets the pace). The ring's steps are paced by its slowest hop once
every rank has a chunk to pass on (count >= p: a rank's exchange waits for its send to the next
rank as well as for the receive); with fewer elements than ranks (8 B) the few chunks travel
alone, once around for the reduce-scatter and once for the all-gather, each crossing every hop
but one each way: about the mean hop per step. Where two chunks meet, a rank's exchange waits
for both, so the model follows, step by step, the longest chain of exchanges that wait for each
other (ring_chain): at 8 B on a 4x4x4 torus 83.0 us (the mean hop gives 82.7), but with 4
elements on 5 ranks of a 1x2x3 torus 7.0 us (the mean hop 5.6; simulated 7.5). beta = 1 / link
bandwidth. Reduction arithmetic is not counted (gamma = 0): scripts/simulate
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
          up to 16 KiB, the latency path: every receive posted at once, so subtrees run side by
          side and the time is the tree's deepest path (rank v is popcount(v) hops from rank 0),
          up and down, plus rank 0's link carrying one vector per child:
                                 2 (max_v sum_hops alpha + ceil(log2 p) n beta)
          For p a power of two both give 2 log2(p) alpha at 8 B; for other p the deepest path
          is shorter than ceil(log2 p) rounds (p = 3: one hop, not two), which the sum of rounds
          overestimated by up to half.
  dbtree  two binary trees, half the vector each, pipelined in segments of c bytes: the fill
          (up and down the depth d) plus each rank's links carrying 2n in all:
                                 2 d (alpha_max + c beta) + 2 n beta
  direct  fully connected: 2 steps, each of p-1 messages of n/p in flight at once (every segment
          of every message posted together), so a step pays one latency (the farthest partner's)
          and its link carries (p-1)/p n:
                                 2 (alpha_max + (p-1)/p n beta)
          With --max-inflight K the p-1 exchanges go in ceil((p-1)/K) rounds, each paying the
          latency; the link still carries (p-1)/p n:
                                 2 (ceil((p-1)/K) alpha_max + (p-1)/p n beta)
          This holds where the network gives every rank its link's bandwidth to all the others at
          once (a non-blocking fat-tree); on a torus the p-1 flows share the links between, and
          the model is a lower bound. The busiest link is that of the rank owning the largest
          piece, ceil(count/p) elements: p-1 copies of it arrive there in the reduce-scatter and
          leave in the all-gather, so the beta term is 2 (p-1) ceil(count/p) esize beta, which is
          the above where p divides the count. With fewer elements than ranks (8 B) only the
          ranks owning an element's piece receive in the first step and send in the second: the
          same 2 alpha, and p-1 single elements through the owners' links (0.3 us at p = 1024).
  torus   an R x C grid (common/coll/coll_torus.c: columns of R consecutive ranks, rows of ranks R
          apart): the ring's steps along the rows on chunks of n/C, then along the columns on
          pieces of n/p, and back:
                                 2 (C-1) (s(n/C) alpha_row + n/C beta) + 2 (R-1) (s(n/p) alpha_col + n/p beta)
                                 = 2 (R-1 + C-1) alpha + 2 (p-1)/p n beta
          alpha_row and alpha_col: the slowest hop of the row rings and of the column rings. With
          fewer elements than ranks, each dimension's rings carry the few chunks as the ring's do
          (ring_chain), the rows' then the columns'.
"""

import math

# Up to this many bytes the suite's rhd all-reduce runs recursive doubling of the whole vector
# instead (SLC_RHD_DOUBLING_BYTES in common/coll/coll_internal.h): log2(p) steps of n bytes.
RHD_DOUBLING_BYTES = 32 << 10
# Up to this many bytes the suite's tree all-reduce takes its latency path (SLC_TREE_LATENCY_BYTES
# in common/coll/coll_internal.h): one message per edge and direction, every receive posted at once.
TREE_LATENCY_BYTES = 16 << 10


def ring_chain(hops, count):
    """The latency of the suite's ring all-reduce (common/coll/coll_ring.c) when only `count` < p
    chunks hold an element (chunk i < count): step by step, the time each rank finishes its
    exchange, which waits for its own send (to r+1, hops[r]) when it has a chunk to send and for
    the receive (from r-1) when it has one coming; a rank with neither goes straight on. Only the
    ranks a chunk passes are visited: O(p count)."""
    p = len(hops)
    done = [0.0] * p
    for first in (1, 0):  # reduce-scatter: rank r sends chunk r-s-1; all-gather: chunk r-s
        for s in range(p - 1):
            active = {(i + s + first + d) % p for i in range(count) for d in (0, 1)}
            new = {}
            for r in active:
                t = done[r]
                if (r - s - first) % p < count:       # a chunk to send
                    t = max(t, done[r] + hops[r])
                if (r - s - first - 1) % p < count:   # a chunk coming from r - 1
                    t = max(t, done[r - 1] + hops[r - 1])
                new[r] = t
            for r, t in new.items():
                done[r] = t
    return max(done)


def torus_grid(p):
    """The torus's default grid for p ranks (sl_coll_torus_grid): the most square R x C, R <= C."""
    rows = max(d for d in range(1, int(p ** 0.5) + 1) if p % d == 0)
    return rows, p // rows


def model(coll, p, n, plat, segment=256 << 10, esize=4, grid=None, inflight=None):
    """Predicted seconds for an all-reduce of n bytes on ranks 0..p-1 of plat (rank i on host
    i), or None for an implementation without a model (the MPI library's)."""
    beta = 1.0 / plat.bw

    def segs(m):
        return max(1, math.ceil(m / segment))
    if p == 1:
        return 0.0
    if coll == "ring":
        hops = [plat.route_latency(r, (r + 1) % p) for r in range(p)]
        if n / esize < p:
            return ring_chain(hops, int(n // esize)) + 2 * (p - 1) / p * n * beta
        return 2 * (p - 1) * (segs(n / p) * max(hops) + n / p * beta)
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
        if n <= TREE_LATENCY_BYTES:
            # every receive is posted at once, so the subtrees run side by side: what counts is
            # the longest path of hops up to rank 0 (and back down), rank v's parent being v
            # less its lowest set bit, plus rank 0's link carrying one vector per child.
            def path(v):
                t = 0.0
                while v:
                    t += plat.route_latency(v, v & (v - 1))
                    v &= v - 1
                return t
            return 2 * (max(path(v) for v in range(p)) + rounds * n * beta)
        t = 0.0
        for k in range(rounds):
            d = 1 << k
            worst = max((plat.route_latency(v, v + d) for v in range(0, p, 2 * d) if v + d < p),
                        default=0.0)
            t += 2 * (segs(n) * worst + n * beta)
        return t
    if coll == "direct":
        alpha_max = max(plat.route_latency(0, r) for r in range(1, p))
        rounds = math.ceil((p - 1) / min(inflight or p - 1, p - 1))
        piece = math.ceil(n / esize / p) * esize  # the largest piece, in bytes
        return 2 * (rounds * alpha_max + (p - 1) * piece * beta)
    if coll == "torus":
        R, C = grid or torus_grid(p)
        row_hops = [[plat.route_latency(i + j * R, i + (j + 1) % C * R) for j in range(C)] for i in range(R)]
        col_hops = [[plat.route_latency(j * R + i, j * R + (i + 1) % R) for i in range(R)] for j in range(C)]
        a_row = max(max(h) for h in row_hops) if C > 1 else 0.0
        a_col = max(max(h) for h in col_hops) if R > 1 else 0.0
        count = int(n // esize)
        if count < p:  # few chunks: each dimension's rings as the ring's with `count` chunks
            t = max(ring_chain(h, -(-count // R)) for h in row_hops) if C > 1 else 0.0
            t += max(ring_chain(h, min(count, R)) for h in col_hops[:1]) if R > 1 else 0.0
            return t + 2 * (p - 1) / p * n * beta
        return (2 * (C - 1) * (segs(n / C) * a_row + n / C * beta)
                + 2 * (R - 1) * (segs(n / p) * a_col + n / p * beta))
    if coll == "dbtree":
        depth = math.ceil(math.log2(p))
        alpha_max = max(plat.route_latency(0, r) for r in range(p))
        c = min(segment, n / 2)
        return 2 * depth * (alpha_max + c * beta) + 2 * n * beta
    return None
