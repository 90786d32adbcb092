"""What a consistent map series' windows add up to: each pair of years' changes in the raw and in the
consistent maps (:class:`lcflow.maps.change.PairTally`), and their scores against truth (the demo's): each
year's share of the pixels of known truth the maps got right, and each pair's true changes found."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lcflow.maps import change


@dataclass
class SeriesTally:
    """What a series' windows add up to: each pair of years' changes in the raw and in the consistent maps,
    and their scores against truth where it is given."""

    raw: list[change.PairTally]
    consistent: list[change.PairTally]
    score: TruthScore

    @classmethod
    def of(cls, years: int, classes: int) -> SeriesTally:
        pairs = range(years - 1)
        return cls(
            [change.PairTally(classes) for _ in pairs],
            [change.PairTally(classes) for _ in pairs],
            TruthScore.of(years),
        )

    def add(self, raw: np.ndarray, path: np.ndarray, both: list[np.ndarray]) -> None:
        """A window's raw and consistent classes (years, pixels), on each pair's pixels of data in both years."""
        for t in range(len(self.raw)):
            self.raw[t].add(raw[t], raw[t + 1], both[t])
            self.consistent[t].add(path[t], path[t + 1], both[t])

    def add_truth(
        self,
        truth: np.ndarray,
        known: np.ndarray,
        codes: np.ndarray,
        raw: np.ndarray,
        path: np.ndarray,
    ) -> None:
        """A window's truth, where it is known, against its raw and consistent classes.

        Args:
            truth: (years, pixels) true class codes.
            known: (years, pixels), True where the truth is known and the maps have data.
            codes: the class code of each class index.
            raw: (years, pixels) each year's most likely class (indices).
            path: (years, pixels) the consistent classes (indices).
        """
        self.score.add(truth, known, codes[raw], codes[path])
        tally_truth(truth, known, (raw, self.raw), (path, self.consistent))

    def pairs(
        self, years: list[int], changes: list, pixel_area_m2: float, truth: bool
    ) -> list[dict]:
        """Each pair of years' change map and summaries, raw and consistent."""
        return [
            {
                "years": [years[i], years[i + 1]],
                "change_map": str(changes[i]),
                "raw": self.raw[i].summary(pixel_area_m2, truth),
                "consistent": self.consistent[i].summary(pixel_area_m2, truth),
            }
            for i in range(len(self.raw))
        ]


@dataclass
class TruthScore:
    """Each year's pixels of known truth, and how many of them the raw and the consistent maps got right."""

    assessed: np.ndarray  # (years,)
    correct: np.ndarray  # (2, years): raw, consistent

    @classmethod
    def of(cls, years: int) -> TruthScore:
        return cls(np.zeros(years, dtype=np.int64), np.zeros((2, years), dtype=np.int64))

    def add(
        self, truth: np.ndarray, known: np.ndarray, raw_codes: np.ndarray, codes: np.ndarray
    ) -> None:
        """A window's (years, pixels) truth, where it is known, against the raw and the consistent codes."""
        for t in range(len(truth)):
            self.assessed[t] += int(known[t].sum())
            self.correct[0, t] += int((raw_codes[t] == truth[t])[known[t]].sum())
            self.correct[1, t] += int((codes[t] == truth[t])[known[t]].sum())

    def shares(self) -> dict[str, list[float]]:
        return {
            "raw": (self.correct[0] / np.maximum(self.assessed, 1)).tolist(),
            "consistent": (self.correct[1] / np.maximum(self.assessed, 1)).tolist(),
        }


def tally_truth(truth: np.ndarray, known: np.ndarray, *series: tuple[np.ndarray, list]) -> None:
    """Each pair of years' true changes against the changes of each (class indices, pair tallies) series."""
    for t in range(len(truth) - 1):
        both = known[t] & known[t + 1]
        truly = truth[t] != truth[t + 1]
        for classes, tallies in series:
            tallies[t].add_truth(truly, classes[t] != classes[t + 1], both)
