"""A study's settings: the config's ``hpo`` section, one field a key (docs/reference/config.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lcflow.common.settings import ConfigSection
from lcflow.defaults import default


@dataclass(frozen=True, kw_only=True)
class HpoSettings(ConfigSection):
    """How a study draws, prunes and compares its trials, and its budget; for the rules, which models are
    studied and by how many workers. Each field is the config key of its name, and defaults to the schema's
    default."""

    SECTION: ClassVar[str] = "hpo"
    RULE_KEYS: ClassVar[frozenset[str]] = frozenset({"models", "workers"})
    #: ``lcflow tune --space FILE`` / ``--space-json`` give the tuned model's space alone
    OWN_OPTIONS: ClassVar[frozenset[str]] = frozenset({"space"})

    models: tuple[str, ...] = field(default_factory=lambda: tuple(default("hpo.models")))
    trials: int = default("hpo.trials")
    workers: int = default("hpo.workers")
    timeout_minutes: float | None = default("hpo.timeout_minutes")
    sampler: str = default("hpo.sampler")
    pruner: str = default("hpo.pruner")
    min_rounds: int = default("hpo.min_rounds")
    reduction_factor: int = default("hpo.reduction_factor")
    seed: int = default("hpo.seed")
    metric: str = default("hpo.metric")
    storage: str | None = default("hpo.storage")
    space: dict[str, Any] = field(default_factory=lambda: dict(default("hpo.space")))

    def space_of(self, model: str) -> dict[str, Any] | None:
        """The search space the config gives ``model`` (None: the model's default space)."""
        return self.space.get(model)

    def worker_json(self, model: str) -> str:
        """What a worker of ``model``'s study is handed (``--settings``): the keys its command acts on, and
        its model's space alone, so that studying another model, or with more workers, reruns none of its jobs."""
        given = {k: v for k, v in self.as_config().items() if k not in self.RULE_KEYS}
        given["space"] = {model: self.space[model]} if model in self.space else {}
        # in the config's order, never sorted: the sampler draws the space's parameters in it
        return json.dumps(given, separators=(",", ":"))
