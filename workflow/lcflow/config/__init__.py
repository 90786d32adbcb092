"""The workflow configuration: loaded and merged (loading), checked before any job runs (validation: the
schema, then the cross-stage checks in cross_stage), and the ``lcflow check-config`` command."""

from lcflow.config.commands import register
from lcflow.config.cross_stage import demo_outputs
from lcflow.config.loading import DEFAULT_CONFIG, Origins, merge, unset_nulls
from lcflow.config.validation import check

__all__ = ["DEFAULT_CONFIG", "Origins", "check", "demo_outputs", "merge", "register", "unset_nulls"]
