"""One privacy event per round, composed into a privfed accountant, ε(δ) reported."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, List, Optional

from flwr.supercore import log as flwr_log

from .. import accounting

LOG = logging.getLogger("privfed.flwr")


@dataclass
class RoundRecord:
    """What one round released and what the accountant says after it."""

    server_round: int
    contributors: int
    event: Optional[Any]  # None: nothing private released (no contributor, aborted round)
    epsilon: float  # ε(δ) of everything composed so far (after this round)
    note: str = ""


class PrivacyLedger:
    """A privfed accountant plus the per-round history the strategies report.

    ``accountant`` defaults to :class:`privfed.accounting.RdpAccountant`; ``budget`` (an ε at
    ``delta``) makes :meth:`would_exceed` answer whether a planned event would cross it.
    """

    def __init__(
        self,
        delta: float,
        accountant: Optional[Any] = None,
        budget: Optional[float] = None,
    ) -> None:
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        self.delta = float(delta)
        self.accountant = accountant if accountant is not None else accounting.RdpAccountant()
        self.budget = budget
        self.history: List[RoundRecord] = []

    @property
    def epsilon(self) -> float:
        """ε(δ) of all events composed so far (0 before any)."""
        return self.history[-1].epsilon if self.history else 0.0

    def would_exceed(self, event: Any) -> bool:
        if self.budget is None:
            return False
        return bool(self.accountant.would_exceed((self.budget, self.delta), event))

    def record(self, server_round: int, event: Optional[Any], contributors: int,
               note: str = "") -> RoundRecord:
        if event is not None:
            self.accountant.compose(event)
            eps = float(self.accountant.get_epsilon(self.delta))
        else:
            eps = self.epsilon
        rec = RoundRecord(server_round, contributors, event, eps, note)
        self.history.append(rec)
        msg = "privfed: round %d: %d contributors, ε = %.4f at δ = %g%s"
        args = (server_round, contributors, eps, self.delta, f" ({note})" if note else "")
        flwr_log(logging.INFO, msg, *args)
        LOG.info(msg, *args)
        return rec
