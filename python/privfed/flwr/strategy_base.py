"""A strategy that delegates to an inner Flower strategy (the wrappers' base)."""

from __future__ import annotations

from typing import Iterable, Optional, Tuple

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy


class WrappedStrategy(Strategy):
    """Delegates every step to ``inner``; subclasses override what they change."""

    def __init__(self, inner: Strategy) -> None:
        if not isinstance(inner, Strategy):
            raise TypeError(
                "inner must be a flwr.serverapp.strategy.Strategy (Flower's Message API), "
                f"got {type(inner).__name__}"
            )
        self.inner = inner

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.inner.configure_train(server_round, arrays, config, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> Tuple[Optional[ArrayRecord], Optional[MetricRecord]]:
        return self.inner.aggregate_train(server_round, replies)

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.inner.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> Optional[MetricRecord]:
        return self.inner.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        self.inner.summary()
