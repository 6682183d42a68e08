"""The per-arm wall clock (S7). Its own module: option parsing needs it without the SDK."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ceiling:
    """S7: the per-arm wall clock and where its value came from."""

    seconds: float  # 0 = off
    source: str = "default"
    what: str = "arm ceiling: the arm"
    remedy: str = "raise it with --arm-timeout=SECONDS (0 disables it)"

    def reason(self) -> str:
        return (f"{self.what} ran past {self.seconds:g} s (per-arm wall clock, from "
                f"{self.source}); {self.remedy}. This is not the task pool's budget.seconds")
