"""decide — one row's verdict: did the new run's figure drop beyond noise and the minimum effect?

With rounds on both sides (run_all.sh --rounds K / --ci) each round gives one value per row: the
rounds are separate processes, so their values are independent samples of the run-to-run
variation that iterations inside one process do not show (they share its placement, its page
layout and the load of that minute). A drop is a REGRESSION when
  - the rank test (Mann-Whitney U, one-sided in the direction of the change: for a drop, that
    the new rounds lie below the baseline's) gives p <= alpha, and
  - the change of the medians is beyond the limit: the minimum effect, or noise_k standard
    errors of the difference of the medians when the rows are noisier than that, but never
    beyond max_limit.
Before that, each side may set aside one round that lies far from its own run's other rounds
(set_aside): one descheduled round must not hide a shift that the other rounds all show.
With one round on a side there is no rank test, and one round cannot tell noise from a change:
two identical --quick runs on a shared machine differ by 20-40% in some rows, and beyond 50% in
a few (a small all-reduce's median tripled by two descheduled iterations of three). A change
beyond the minimum effect and noise_k times the rows' combined iteration cv is then INCONCLUSIVE
(it does not fail). A drop is a REGRESSION (decided by one round: Decision.one_round says so)
only when it is beyond max_limit *and* beyond the noise each row measured itself: the new row's
fastest timed iteration is slower than the baseline row's slowest (separated). A slowdown of
the code lengthens every iteration, the fastest included; the noise of a loaded machine
stretches some iterations and leaves the fastest near where it was, so the two rows' iterations
overlap (Decision.unproven = "overlap"). Nor may it be within what the comparison's rows moved
between the two runs: drift_k times the spread of all rows' changes (between_runs_floor, taken
over the single rounds), which on a machine at load 15 is beyond 100%: a drop one round cannot
call at all ("moved"). A row that timed nothing of its own (a plateau fitted to
the measured rows) measured no noise, so one round cannot prove its drop ("untimed"): the measured
rows it comes from are gated themselves.
"""
import math
from statistics import median

from .ranktest import mann_whitney, min_p


def rel_spread(values):
    """Robust relative spread of a sample: 1.4826 * MAD / |median| (the sd for normal data)."""
    med = median(values)
    if med == 0 or len(values) < 2:
        return 0.0
    mad = median(abs(v - med) for v in values)
    return 1.4826 * mad / abs(med)


def between_runs_floor(pairs, k, least=2):
    """The least limit for this comparison: k times the robust spread of the rows' changes.

    The rounds of one run follow each other within minutes, so their spread says nothing of how
    much a row moves between two runs: a neighbour's build that started between them moves
    whole programs by tens of percent while each run's rounds agree. Most rows of a comparison
    did not change, so the spread of all rows' changes (1.4826 * MAD of log(new/base) over the
    rows with rounds on both sides) measures that movement; a row must drop by more than k of
    it. pairs: (base values, new values) per figure; least: the fewest rounds a side for a figure
    to count (1 when comparing single rounds). Returns (floor, spread); 0 with fewer than 10
    figures."""
    logs = []
    for b, n in pairs:
        if len(set(b) | set(n)) == 1:
            continue  # the same in every round: a model or a range table, not a measurement
        if len(b) >= least and len(n) >= least and median(b) > 0 and median(n) > 0:
            logs.append(math.log(median(n) / median(b)))
    if len(logs) < 10:
        return 0.0, 0.0
    m = median(logs)
    spread = math.expm1(1.4826 * median(abs(x - m) for x in logs))
    return k * spread, spread


OUTLIER_Z = 3.5  # Iglewicz and Hoaglin's cut for the modified z-score 0.6745 (x - median) / MAD
SET_ASIDE_MIN = 5  # only a side of at least this many rounds sets one aside


def set_aside(values, min_dev):
    """values without their one most outlying round, when the side has at least SET_ASIDE_MIN
    rounds and that round stands alone: it is min_dev (the minimum effect) or more away from the
    side's median (alone, a change the gate would call) while every other round is within
    min_dev of it, and its modified z-score (distance from the median in units of the MAD) is
    beyond OUTLIER_Z. Returns (kept, number set aside: 0 or 1, that round's modified z-score).

    Why: with five rounds a side, the rank test reaches p <= 0.01 only when (almost) every new
    round lies below every baseline round. One round in which the machine stalled (here: ddp's
    scaling efficiency 0.56 in a run whose other rounds gave 0.79 to 0.85) then hides a 20% drop
    that the other rounds all show. Only a lone outlier goes: a row whose rounds are spread, or
    fall into two modes (a small all-reduce here gave 1.1 or 0.7 GB/s by the round), keeps all
    of them, and with them its noise limit; trimming one of its low rounds would turn the
    modes into a shift."""
    if len(values) < SET_ASIDE_MIN:
        return list(values), 0, 0.0
    med = median(values)
    mad = median(abs(v - med) for v in values)
    if mad == 0 or med == 0:
        return list(values), 0, 0.0
    far = [i for i, v in enumerate(values) if abs(v - med) >= min_dev * abs(med)]
    z = 0.6745 * abs(values[far[0]] - med) / mad if len(far) == 1 else 0.0
    if z <= OUTLIER_Z:
        return list(values), 0, 0.0
    return [v for i, v in enumerate(values) if i != far[0]], 1, z


class Decision:
    __slots__ = ("base", "new", "change", "limit", "p", "verdict", "aside", "one_round", "unproven")

    def __init__(self, base, new, change, limit, p, verdict, aside=(0, 0), one_round=False, unproven=None):
        self.base, self.new, self.change, self.limit, self.p, self.verdict = base, new, change, limit, p, verdict
        self.aside = aside  # rounds set aside (baseline, new)
        self.one_round = one_round  # no rank test: one round on a side
        # one round: why a drop beyond max_limit is not a REGRESSION: "overlap" (the two rows'
        # timed iterations overlap), "untimed" (a row timed nothing) or "moved" (within what
        # all rows moved between the two runs); None otherwise
        self.unproven = unproven


def separated(bspan, nspan):
    """With one round a side: did the new row's iterations all take longer than the baseline
    row's? bspan, nspan: (fastest, slowest) timed iteration of each side's row, or None when a
    side timed nothing (then None: the rows measured no spread to tell noise by)."""
    if not bspan or not nspan:
        return None
    return nspan[0] > bspan[1]


def decide(bvals, nvals, bcv, ncv, opt, gated=True, floor=0.0, spans=(None, None)):
    """bvals, nvals: the values per round (higher is better); bcv, ncv: the rows' iteration cv
    and spans: their (fastest, slowest) timed iteration, baseline and new (for single rounds).
    opt: min_effect, noise_k, max_limit, alpha. floor: the least limit (between_runs_floor).
    None when not comparable."""
    if not bvals or not nvals:
        return None
    aside = (0, 0)
    if len(bvals) >= 2 and len(nvals) >= 2:
        (bk, ob, bz), (nk, on, nz) = set_aside(bvals, opt.min_effect), set_aside(nvals, opt.min_effect)
        if ob and on and min_p(len(bk), len(nk), "less") > opt.alpha:
            # both sides lost a round and the test could no longer reach alpha (4 vs 4): only
            # the farther outlier goes
            if bz >= nz:
                nk, on = list(nvals), 0
            else:
                bk, ob = list(bvals), 0
        bvals, nvals, aside = bk, nk, (ob, on)
    mb, mn = median(bvals), median(nvals)
    if mb == 0:
        return None
    change = (mn - mb) / abs(mb)
    one_round = len(bvals) < 2 or len(nvals) < 2
    if not one_round:
        # standard error of a median is about 1.2533 sd / sqrt(k) for normal data
        se = 1.2533 * math.sqrt(rel_spread(bvals) ** 2 / len(bvals) + rel_spread(nvals) ** 2 / len(nvals))
        limit = min(max(opt.min_effect, opt.noise_k * se, floor), opt.max_limit)
        p, _ = mann_whitney(nvals, bvals, "less" if change < 0 else "greater")
        significant = p <= opt.alpha
    else:
        limit = min(max(opt.min_effect, opt.noise_k * math.hypot(bcv, ncv)), opt.max_limit)
        p, significant = None, False
    unproven = None
    if not gated:
        verdict = "shown"
    elif one_round:
        sep = separated(*spans)
        if change < -opt.max_limit and not sep:
            unproven = "untimed" if sep is None else "overlap"
        elif change < -opt.max_limit and change >= -floor:
            unproven = "moved"
        verdict = ("REGRESSION" if change < -opt.max_limit and not unproven else
                   "INCONCLUSIVE" if abs(change) > limit else "ok")
    elif change < -limit and significant:
        verdict = "REGRESSION"
    elif change > limit and significant:
        verdict = "improved"
    else:
        verdict = "ok"
    return Decision(mb, mn, change, limit, p, verdict, aside, one_round, unproven)
