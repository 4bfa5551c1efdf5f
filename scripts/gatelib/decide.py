"""decide — one row's verdict: did the new run's figure drop beyond noise and the minimum effect?

With rounds on both sides (run_all.sh --rounds K / --ci) each round gives one value per row: the
rounds are separate processes, so their values are independent samples of the run-to-run
variation that iterations inside one process do not show (they share its placement, its page
layout and the load of that minute). A drop is a REGRESSION when
  - the rank test (Mann-Whitney U, two-sided) gives p <= alpha, and
  - the change of the medians is beyond the limit: the minimum effect, or noise_k standard
    errors of the difference of the medians when the rows are noisier than that, but never
    beyond max_limit.
With one round on a side there is no rank test: the drop must exceed the minimum effect and
noise_k times the rows' combined iteration cv (the rule of single runs, which shared machines
defeat; compare says so).
"""
import math
from statistics import median

from .ranktest import mann_whitney


def rel_spread(values):
    """Robust relative spread of a sample: 1.4826 * MAD / |median| (the sd for normal data)."""
    med = median(values)
    if med == 0 or len(values) < 2:
        return 0.0
    mad = median(abs(v - med) for v in values)
    return 1.4826 * mad / abs(med)


def between_runs_floor(pairs, k):
    """The least limit for this comparison: k times the robust spread of the rows' changes.

    The rounds of one run follow each other within minutes, so their spread says nothing of how
    much a row moves between two runs: a neighbour's build that started between them moves
    whole programs by tens of percent while each run's rounds agree. Most rows of a comparison
    did not change, so the spread of all rows' changes (1.4826 * MAD of log(new/base) over the
    rows with rounds on both sides) measures that movement; a row must drop by more than k of
    it. pairs: (base values, new values) per figure. Returns (floor, spread); 0 with fewer than
    10 figures."""
    logs = []
    for b, n in pairs:
        if len(b) >= 2 and len(n) >= 2 and median(b) > 0 and median(n) > 0:
            logs.append(math.log(median(n) / median(b)))
    if len(logs) < 10:
        return 0.0, 0.0
    m = median(logs)
    spread = math.expm1(1.4826 * median(abs(x - m) for x in logs))
    return k * spread, spread


class Decision:
    __slots__ = ("base", "new", "change", "limit", "p", "verdict")

    def __init__(self, base, new, change, limit, p, verdict):
        self.base, self.new, self.change, self.limit, self.p, self.verdict = base, new, change, limit, p, verdict


def decide(bvals, nvals, bcv, ncv, opt, gated=True, floor=0.0):
    """bvals, nvals: the values per round (higher is better); bcv, ncv: the rows' iteration cv
    (for single rounds). opt: min_effect, noise_k, max_limit, alpha. floor: the least limit
    (between_runs_floor). None when not comparable."""
    if not bvals or not nvals:
        return None
    mb, mn = median(bvals), median(nvals)
    if mb == 0:
        return None
    change = (mn - mb) / abs(mb)
    if len(bvals) >= 2 and len(nvals) >= 2:
        # standard error of a median is about 1.2533 sd / sqrt(k) for normal data
        se = 1.2533 * math.sqrt(rel_spread(bvals) ** 2 / len(bvals) + rel_spread(nvals) ** 2 / len(nvals))
        limit = min(max(opt.min_effect, opt.noise_k * se, floor), opt.max_limit)
        p, _ = mann_whitney(nvals, bvals)
        significant = p <= opt.alpha
    else:
        limit = min(max(opt.min_effect, opt.noise_k * math.hypot(bcv, ncv)), opt.max_limit)
        p, significant = None, True
    if not gated:
        verdict = "shown"
    elif change < -limit and significant:
        verdict = "REGRESSION"
    elif change > limit and significant:
        verdict = "improved"
    else:
        verdict = "ok"
    return Decision(mb, mn, change, limit, p, verdict)
