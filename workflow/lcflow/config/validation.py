"""Check the workflow configuration before any job runs, and say in one line what is wrong and where: no
secret in a URL, then the schema, then the cross-stage checks; when several config files are merged,
an error names the file (or ``--config``) that set the value at fault."""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from lcflow.common import schema_errors
from lcflow.common.schema_errors import key_path
from lcflow.config import cross_stage
from lcflow.config.cross_stage import BadValue
from lcflow.config.loading import DEFAULT_CONFIG, Origins
from lcflow.defaults import SafeLoader
from lcflow.errors import LcflowError
from lcflow.retrieve.remote import refuse_secrets

if TYPE_CHECKING:
    import jsonschema


def check(
    config: dict[str, Any],
    schema_path: str | Path,
    base: str | Path = ".",
    today: dt.date | None = None,
    origins: Origins | None = None,
    files: bool = True,
) -> None:
    """Raise :class:`LcflowError` naming the first bad key and value (and, given ``origins``, its file).

    Args:
        config: the merged configuration.
        schema_path: the workflow's schema.
        base: the folder relative paths of the config are taken from.
        today: the date years are checked against (None: today).
        origins: which file set each key, named in the message; None: none.
        files: check that the input files exist (False: a budget, made before they are fetched).
    """
    try:
        _check(config, schema_path, Path(base), today, files)
    except BadValue as bad:
        source = origins.of(bad.path) if origins else None
        hint = ""
        if not bad.path and "is a required property" in bad.message and origins and origins.files:
            given = " ".join(map(str, origins.files))
            hint = (
                f" (config files: {given}): a config names tiles, years, models, results, stac and labels; to "
                f"change a few keys of another config, give both, yours last: --configfile {DEFAULT_CONFIG} "
                f"{origins.files[-1]}"
            )
        raise LcflowError(
            f"config: {bad.message}" + (f" (set in {source})" if source else "") + hint
        ) from None


@functools.lru_cache(maxsize=4)
def _validator(schema_path: Path, version: int) -> jsonschema.Draft202012Validator:
    """The schema's validator, parsed once for each ``version`` (modification time) of its file: checking
    many configs (a test's examples, a workflow's includes) then costs a validation each, not a parse."""
    from lcflow.common.strict_schema import validator

    return validator(yaml.load(schema_path.read_text(), Loader=SafeLoader))


#: the most values a config may expand to, its YAML aliases written out (the demo's: a few hundred)
MOST_VALUES = 100_000


def _check_shape(config: Any) -> None:
    """Refuse a config whose aliases expand to more than MOST_VALUES values (a few hundred bytes of nested
    aliases expand to billions, which a schema check would walk), and any number that is NaN or infinite,
    naming its key. The expanded size is counted once a shared node, so the count itself stays cheap."""
    sizes: dict[int, int] = {}

    def size(node: Any, path: tuple) -> int:
        if isinstance(node, float) and not math.isfinite(node):
            raise BadValue(path, f"{key_path(path)} = {node} is not a number")
        if not isinstance(node, (Mapping, list)):
            return 1
        if id(node) not in sizes:
            items = node.items() if isinstance(node, Mapping) else enumerate(node)
            total = 1
            for k, v in items:
                total += size(v, path + (k,))
                if total > MOST_VALUES:
                    raise BadValue(
                        path,
                        f"{key_path(path) if path else 'the config'} expands to more than {MOST_VALUES:,} values "
                        "(YAML aliases nested in aliases): write the values out",
                    )
            sizes[id(node)] = total
        return sizes[id(node)]

    size(config, ())


def _refuse_secrets(node: Any, path: tuple = (), seen: set[int] | None = None) -> None:
    """No URL in the config carries credentials: the config reaches job command lines and Snakemake's logs.
    Checked first, so that no later message repeats a secret. Each mapping and list is walked once: YAML's
    aliases share them, and a few hundred bytes of aliases nest into more paths than any walk could take."""
    seen = set() if seen is None else seen
    if isinstance(node, (Mapping, list)):
        if id(node) in seen:
            return
        seen.add(id(node))
        for k, v in node.items() if isinstance(node, Mapping) else enumerate(node):
            _refuse_secrets(v, path + (k,), seen)
    elif isinstance(node, str) and "://" in node:
        try:
            refuse_secrets(node, key_path(path))
        except LcflowError as exc:
            raise BadValue(path, str(exc)) from None


def _check(
    config: dict[str, Any],
    schema_path: str | Path,
    base: Path,
    today: dt.date | None,
    files: bool = True,
) -> None:
    """Every check, in the order their messages take precedence: its size, secrets, the schema, then
    lcflow's own."""
    schema_path = Path(schema_path).resolve()
    validator = _validator(schema_path, schema_path.stat().st_mtime_ns)
    known = validator.schema.get("properties", {})
    unknown = set(config) - set(known) if isinstance(config, Mapping) else set()
    if unknown:  # said before its values are walked: a misspelt key is the likelier fault
        raise BadValue((), schema_errors.unknown_key(unknown, key_path(())))
    _check_shape(config)
    _refuse_secrets(config)
    errors = sorted(
        validator.iter_errors(config),
        key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))),
    )
    if errors:
        raise BadValue(errors[0].absolute_path, schema_errors.message(errors[0]))
    cross_stage.check_all(config, validator.schema, base, today, files)
