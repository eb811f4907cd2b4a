"""The refill policy: fetch deeper when grouping under-fills a page (SPEC §4.8).

GROUP BY DOCUMENT keeps one chunk per document and the conversation walk one hit per
conversation (or hides live ones), so a window of N candidates per leg can yield fewer rows than
the page needs. When a merge under-filled while some leg filled its window (a deeper window
could hold more rows) and the result was not truncated, the legs run again with the window ×4,
up to `MAX_WINDOW`; past that the result says `WINDOW_EXHAUSTED`. One policy object decides, for
one database (`QueryEngine.execute`) and for a coordinator alike (`run_statement`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from recallql.engine.legs import LegBatches
from recallql.engine.merging import MergeOutcome, MergeSource, dedupe, merge_outcome
from recallql.engine.models import Explain, Notice, Result
from recallql.engine.plan import QueryPlan
from recallql.engine.reasons import Reason

#: Deeper refills stop at this candidate window.
MAX_WINDOW = 10_000


@dataclass(frozen=True)
class Refill:
    """A decision: run again with `window`, or stop (`window` None; `exhausted` when the page
    may be short because `MAX_WINDOW` was reached)."""

    window: int | None
    exhausted: bool = False


@dataclass(frozen=True)
class RefillPolicy:
    """Deeper windows for under-filled pages: ×`factor` up to `max_window`."""

    factor: int = 4
    max_window: int = MAX_WINDOW

    def decide(self, window: int, size: int, outcome: MergeOutcome) -> Refill:
        """The next step after a merge with candidate window `window` on a collection of
        `size` rows (rowid upper bound: no deeper window can find more)."""
        if not (outcome.underfilled and outcome.cut and not outcome.truncated):
            return Refill(None)
        if window >= min(self.max_window, size):
            return Refill(None, exhausted=window >= self.max_window)
        return Refill(min(window * self.factor, self.max_window))

    def exhausted_notice(self) -> Notice:
        return Notice(code=Reason.WINDOW_EXHAUSTED, message=(
            f"grouping needed more than {self.max_window} candidates per leg; the page may be "
            "short"))


def run_statement(plan: QueryPlan, run_legs: Callable[[QueryPlan], LegBatches],
                  source: MergeSource, policy: RefillPolicy | None = None) -> Result | Explain:
    """`merge(plan, run_legs(plan), source)`, refilled by `policy` until the page is full.

    Args:
        plan: the statement's plan.
        run_legs: runs a plan's legs (`Database.run_legs`, or a coordinator's scatter-gather).
        source: what merge reads besides the candidates.
        policy: the refill policy (default `RefillPolicy()`).
    """
    policy = policy or RefillPolicy()
    while True:
        batches = run_legs(plan)
        outcome = merge_outcome(plan, batches, source)
        step = policy.decide(plan.window, batches.size, outcome)
        if step.window is None:
            return _with_notice(outcome.result, policy.exhausted_notice()) if step.exhausted \
                else outcome.result
        plan = plan.with_window(step.window)


def _with_notice(out: Result | Explain, notice: Notice) -> Result | Explain:
    if isinstance(out, Explain):
        return out.model_copy(update={"result": _with_notice(out.result, notice)})
    return out.model_copy(update={"warnings": dedupe([*out.warnings, notice])})
