"""Check the workflow configuration before any job runs, and say in one line what is wrong."""

import datetime as dt
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .errors import LcflowError
from .models import PATCH as PATCH_MODELS


def _where(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _message(error: jsonschema.ValidationError) -> str:
    where, value = _where(error.absolute_path), error.instance
    if error.validator == "additionalProperties":
        extra = sorted(set(value) - set(error.schema.get("properties", {})))
        return f"unknown key {extra[0]!r} in {where}" if extra else error.message
    if "propertyNames" in error.absolute_schema_path:
        return f"{where}: key {value!r} is not a valid MGRS tile id"
    if error.validator == "pattern":
        kind = "MGRS tile id" if "C-HJ-NP-X" in error.validator_value else "value"
        return f"{where} = {value!r} is not a valid {kind} (pattern {error.validator_value})"
    if error.validator == "enum":
        return f"{where} = {value!r} is not one of {error.validator_value}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    if error.validator == "oneOf":
        return f"{where}: give exactly one of its alternatives ({error.message})"
    return f"{where} = {value!r}: {error.message}"


def check(config: dict[str, Any], schema_path: str | Path, base: str | Path = ".", today: dt.date | None = None) -> None:
    """Raise :class:`LcflowError` naming the first bad key and value: schema, year range, input files."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise LcflowError(f"config: {_message(errors[0])}")
    this_year = (today or dt.date.today()).year
    for i, year in enumerate(config["years"]):
        if year > this_year:
            raise LcflowError(f"config: years[{i}] = {year} is outside 2015..{this_year}")
    patch_px = (config.get("sample") or {}).get("patch_px", 0)
    if patch_px % 2 == 0 and patch_px:
        raise LcflowError(f"config: sample.patch_px = {patch_px} must be odd (a patch is centred on its sample)")
    for model in config["models"]:
        if model in PATCH_MODELS and not patch_px:
            raise LcflowError(f"config: models includes {model}, which trains on patches: set sample.patch_px "
                              "(odd, at least 2 * (1 + 2 * blocks) + 1, e.g. 11)")
    aoi = config.get("aoi", {})
    for tile, bounds in aoi.items():
        if bounds[0] >= bounds[2] or bounds[1] >= bounds[3]:
            raise LcflowError(f"config: aoi.{tile} = {bounds} is not [xmin, ymin, xmax, ymax]")
    if "demo" in config:
        missing = [t for t in config["tiles"] if t not in aoi]
        if missing:
            raise LcflowError(f"config: demo needs aoi for every tile; aoi.{missing[0]} is missing")
    produced = demo_outputs(config)
    base = Path(base)
    inputs = {"stac.catalog": config["stac"].get("catalog"), "labels.corine": config["labels"].get("corine"),
              "labels.mapping": config["labels"].get("mapping")}
    truth = (config.get("assess") or {}).get("truth")
    if truth:
        for tile in config["tiles"]:
            for year in config["years"]:
                inputs[f"assess.truth ({tile} {year})"] = truth.format(tile=tile, year=year)
    for key, path in inputs.items():
        if path and path not in produced and not (base / path).exists():
            raise LcflowError(f"config: {key} = {path!r}: file does not exist")


def demo_outputs(config: dict[str, Any]) -> set[str]:
    """Files the demo's synth rule writes, so they count as inputs that will exist."""
    if "demo" not in config:
        return set()
    out = config["demo"].get("out", "resources/demo")
    files = {f"{out}/catalog/catalog.json", f"{out}/corine/clc_demo_3035.tif"}
    files |= {f"{out}/truth/{t}_{y}.tif" for t in config["tiles"] for y in config["years"]}
    return files
