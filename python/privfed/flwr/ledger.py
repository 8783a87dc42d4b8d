"""One privacy event per round, composed into a privfed accountant, ε(δ) reported."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, List, Optional

from flwr.supercore import log as flwr_log

from .. import accounting, errors

LOG = logging.getLogger("privfed.flwr")


def warn(msg: str, *args: Any) -> None:
    """A WARNING in Flower's log (what a SuperLink operator reads, and ``flwr log`` shows).
    Not repeated on privfed's logger: without a handler Python would print it a second time
    to stderr, which a deployed ServerApp's log also captures."""
    flwr_log(logging.WARNING, msg, *args)


def uncalled_mod_error(name: str, fix: str, args: tuple) -> TypeError:
    """The error of a mod factory that Flower called as a mod (``mods=[factory]``: Flower
    passes it the message, the context and ``call_next``)."""
    looks_like_a_call = len(args) == 3 and type(args[0]).__name__ == "Message"
    why = (" (Flower called it with a message: the factory itself was passed as a mod)"
           if looks_like_a_call else "")
    return TypeError(
        f"privfed.flwr.{name} makes a mod; pass its result, ClientApp(mods=[{fix}]), "
        f"not the function{why}")


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
    ``delta``) makes :meth:`would_exceed` answer whether a planned event would cross it, and
    :meth:`check` raise :class:`privfed.errors.PrivacyBudgetExceeded` if it would.
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

    def epsilon_after(self, event: Any) -> Optional[float]:
        """ε(δ) if ``event`` were composed now (on a copy made through ``state_dict``; None
        when the accountant cannot be copied that way)."""
        try:
            state = self.accountant.state_dict()
            try:
                twin = type(self.accountant)()
                twin.load_state_dict(state)
            except Exception:  # noqa: BLE001 - other settings (e.g. replace-one RDP): rebuild
                twin = type(self.accountant)(
                    orders=state["orders"], neighboring_relation=state["neighbouring_relation"])
                twin.load_state_dict(state)
            twin.compose(event)
            return float(twin.get_epsilon(self.delta))
        except Exception:  # noqa: BLE001 - only the message's number is lost
            return None

    def check(self, server_round: int, event: Any, what: str) -> None:
        """Raises :class:`privfed.errors.PrivacyBudgetExceeded` (after a WARNING) when
        composing ``event`` would take ε(δ) past the budget; ``what`` names the event."""
        if not self.would_exceed(event):
            return
        after = self.epsilon_after(event)
        to = f" to {after:.4f}" if after is not None else ""
        msg = (f"privfed: round {server_round}: {what} would take ε from {self.epsilon:.4f}"
               f"{to} at δ = {self.delta:g}, past the budget {self.budget:g}")
        warn("%s", msg)
        raise errors.PrivacyBudgetExceeded(msg)

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
