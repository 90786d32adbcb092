"""The checks that reach beyond the schema, into the stages: years, model parameters (the tables
``lcflow train`` uses), sample fractions, each ``aoi`` against its MGRS tile, the CORINE codes inside
each tile, the local STAC catalog, the HPO and blend members. Each raises :class:`BadValue` with the key
path at fault."""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lcflow.common.schema_errors import key_path
from lcflow.config import reference_checks
from lcflow.config.bad_value import BadValue
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.retrieve import indices as spectral_indices
from lcflow.retrieve import mgrs
from lcflow.retrieve.remote import is_url
from lcflow.train.models import PATCH as PATCH_MODELS
from lcflow.train.models import hyperparameters

log = logging.getLogger("lcflow")


def check_all(
    config: dict[str, Any],
    schema: dict[str, Any],
    base: Path,
    today: dt.date | None,
    files: bool = True,
) -> None:
    """Every check beyond the schema, in the order their messages take precedence.

    Args:
        config: the merged configuration, the schema's defaults filled in.
        schema: the workflow's schema.
        base: the folder relative paths of the config are taken from.
        today: the date years are checked against (None: today).
        files: check the input files too (False: a budget, made before they are fetched).
    """
    _check_years_samples_models(config, today)
    _check_hpo(config)
    _check_blend(config, schema)
    _check_indices(config, schema)
    _check_aoi(config)
    if "labels" not in config:  # a run of the cubes alone: no label source, no model
        _check_inputs_outside_results(config, base, None)
        if files:
            _check_catalogue(config, base)
        return
    source = _check_label_keys(config["labels"])
    _check_inputs_outside_results(config, base, source)
    _check_truth_nomenclature(config, source)
    if files:
        _check_files(config, base, source)
    _warn_unused_params(config)


#: the folders the workflow writes under ``results`` (and the tiles' own), where ``results`` is the working
#: directory itself and only they are the workflow's
RESULT_FOLDERS = (
    "reference",
    "models",
    "maps",
    "changes",
    "assessment",
    "hpo",
    "quicklooks",
    "stac",
    "logs",
    "benchmarks",
)


def _input_files(
    config: dict[str, Any], source: str | None
) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every file the config names as an input (a per tile-year pattern once per tile-year): key path, path."""
    assess_cfg = config.get("assess") or {}
    for path in (
        ("stac", "catalog"),
        *((("labels", source), ("labels", "mapping"), ("labels", "change")) if source else ()),
    ):
        value = config.get(path[0], {}).get(path[1])
        if value and not is_url(value):
            yield path, value
    for key in ("reference", "truth"):
        if assess_cfg.get(key):
            for tile in config["tiles"]:
                for year in config["years"]:
                    yield ("assess", key), assess_cfg[key].format(tile=tile, year=year)


def _check_inputs_outside_results(config: dict[str, Any], base: Path, source: str | None) -> None:
    """No input lies where the workflow writes: a rerun would change or delete it (a reference labelled in
    place of the design the workflow draws there, redrawn by the next retraining). The demo's own data are
    made by its rules, not inputs."""
    root = base.resolve()
    # before Snakemake fills in the schema's defaults
    results_dir = config.get("results", default("results"))
    results = (base / results_dir).resolve()
    owned = (
        [results]
        if results != root
        else [results / d for d in RESULT_FOLDERS] + [results / t for t in config["tiles"]]
    )
    made = demo_outputs(config)
    for path, value in _input_files(config, source):
        where = (base / value).resolve()
        inside = next((o for o in owned if where == o or o in where.parents), None)
        if value not in made and inside is not None:
            shown = results_dir if inside == results else os.path.relpath(inside, root)
            raise BadValue(
                path,
                f"{key_path(path)} = {value!r} lies inside {shown}/, which the workflow "
                "writes and deletes: a rerun could change or remove it. Keep files made by hand outside "
                "it (a labelled design: copy it to reference/{tile}_{year}.gpkg, label the copy, and name "
                "that here; docs/own-data.md)",
            )


def _check_truth_nomenclature(config: dict[str, Any], source: str) -> None:
    """The demo's truth holds CLC codes: with labels of your own nomenclature there is nothing to compare."""
    truth = (config.get("assess") or {}).get("truth")
    if truth and source == "reference":
        raise BadValue(
            ("assess", "truth"),
            f"assess.truth = {truth!r} is a raster of CLC level-3 codes (the demo's "
            "synthetic truth), and labels.reference gives classes of your own nomenclature: they cannot "
            "be compared. Unset it (assess: {truth: null}) in the config layered last",
        )


def _warn_unused_params(config: dict[str, Any]) -> None:
    """Parameters of a model that is not trained: a model left out of ``models``, or a misspelt name."""
    for model in config.get("model_params") or {}:
        if model not in config["models"]:
            log.warning(
                "config: model_params.%s is set, but %s is not one of models %s: its parameters are not used",
                model,
                model,
                config["models"],
            )


def _check_years_samples_models(config: dict[str, Any], today: dt.date | None) -> None:
    this_year = (today or dt.date.today()).year
    for i, year in enumerate(config["years"]):
        if year > this_year:
            raise BadValue(("years", i), f"years[{i}] = {year} is outside 2015..{this_year}")
    sample = config.get("sample") or {}
    patch_px = sample.get("patch_px", 0)
    if patch_px % 2 == 0 and patch_px:
        raise BadValue(
            ("sample", "patch_px"),
            f"sample.patch_px = {patch_px} must be odd (a patch is centred on its sample)",
        )
    for i, model in enumerate(config.get("models") or []):
        if model in PATCH_MODELS and not patch_px:
            raise BadValue(
                ("models", i),
                f"models includes {model}, which trains on patches: set sample.patch_px "
                "(odd, at least 2 * (1 + 2 * blocks) + 1, e.g. 11)",
            )
    fractions = sample.get("fractions")
    if fractions and not math.isclose(sum(fractions.values()), 1.0, abs_tol=1e-6):
        raise BadValue(
            ("sample", "fractions"),
            f"sample.fractions = {fractions} sum to {sum(fractions.values()):g}, not 1",
        )
    for model, given in (config.get("model_params") or {}).items():
        try:
            hyperparameters.check(model, given, where=f"model_params.{model}")
        except hyperparameters.ParamError as exc:
            raise BadValue(
                ("model_params", model) + ((exc.key,) if exc.key else ()), str(exc)
            ) from None


def _check_indices(config: dict[str, Any], schema: dict[str, Any]) -> None:
    cube_cfg = config.get("cube") or {}
    for i, name in enumerate(cube_cfg.get("indices") or []):
        try:
            bands = (
                cube_cfg.get("bands")
                or schema["properties"]["cube"]["properties"]["bands"]["default"]
            )
            spectral_indices.check([name], bands, where=f"cube.indices[{i}]")
        except LcflowError as exc:
            raise BadValue(("cube", "indices", i), str(exc)) from None


def _check_aoi(config: dict[str, Any]) -> None:
    """Each area inside its tile; an entry of a tile not run is ignored, unless a tile run has none (a typo)."""
    aoi = {tile: bounds for tile, bounds in (config.get("aoi") or {}).items() if bounds is not None}
    whole = [t for t in config["tiles"] if t not in aoi]
    for tile, bounds in aoi.items():
        if bounds[0] >= bounds[2] or bounds[1] >= bounds[3]:
            raise BadValue(("aoi", tile), f"aoi.{tile} = {bounds} is not [xmin, ymin, xmax, ymax]")
        if tile not in config["tiles"] and whole:  # beside a tile without one: a misspelt key?
            raise BadValue(
                ("aoi", tile),
                f"aoi.{tile}: {tile} is not one of tiles {config['tiles']}, and tile {whole[0]} "
                f"has no aoi: a misspelt key would leave {whole[0]} to be processed whole (aoi.{tile}: null "
                "removes an entry)",
            )
        if tile not in config["tiles"]:
            continue  # a tile left out of this run (a config layered over another): its area is not used
        try:
            mgrs.check_inside_tile(tile, bounds)
        except LcflowError as exc:
            raise BadValue(("aoi", tile), f"aoi.{tile} = {bounds}: {exc}") from None
    if "demo" in config and whole:
        raise BadValue(("aoi",), f"demo needs aoi for every tile; aoi.{whole[0]} is missing")


def _check_label_keys(labels_cfg: dict[str, Any]) -> str:
    """The label source's keys agree with each other; which source it is (corine or reference)."""
    given = [k for k in ("corine", "reference") if labels_cfg.get(k)]
    if len(given) != 1:
        raise BadValue(
            ("labels",),
            "labels: give corine (a CORINE raster or vector layer) or reference (your own labelled "
            f"polygons or points), exactly one of them (given: {', '.join(given) or 'neither'})",
        )
    warn, most = labels_cfg.get("unlabelled_warn", 0), labels_cfg.get("unlabelled_max", 1)
    if warn > most:
        raise BadValue(
            ("labels", "unlabelled_warn"),
            f"labels.unlabelled_warn = {warn:g} is above labels.unlabelled_max = {most:g}",
        )
    if given == ["reference"] and not labels_cfg.get("mapping"):
        raise BadValue(
            ("labels", "reference"),
            "labels.reference needs labels.mapping: the nomenclature file that maps "
            "its codes to classes",
        )
    return given[0]


def _check_files(config: dict[str, Any], base: Path, source: str) -> None:
    """Every input file exists or a rule makes it; the catalogue and the label source are read."""
    labels_cfg = config["labels"]
    produced = demo_outputs(config)
    inputs = {
        ("stac", "catalog"): config["stac"].get("catalog"),
        ("labels", source): labels_cfg[source],
        ("labels", "mapping"): labels_cfg.get("mapping"),
        ("labels", "change"): labels_cfg.get("change"),
    }
    for path, value in inputs.items():
        if value and value not in produced and not is_url(value) and not (base / value).exists():
            raise BadValue(path, f"{key_path(path)} = {value!r}: file does not exist")
    _check_per_tile_year(config, base, produced, "truth")
    reference_checks.check_references(config, base, source)
    design_model = ((config.get("assess") or {}).get("design") or {}).get("model")
    if design_model and design_model not in config["models"]:
        raise BadValue(
            ("assess", "design", "model"),
            f"assess.design.model = {design_model!r} is not one of models "
            f"{config['models']} (its map gives the strata)",
        )
    _check_catalogue(config, base)
    if labels_cfg[source] not in produced:
        _check_labels(base, config, source)


def _check_catalogue(config: dict[str, Any], base: Path) -> None:
    """A local static catalogue exists (or the demo makes it) and is read as search will read it."""
    catalog = config["stac"].get("catalog")
    produced = demo_outputs(config)
    if catalog and catalog not in produced and not is_url(catalog):  # read when search runs
        if not (base / catalog).exists():
            raise BadValue(("stac", "catalog"), f"stac.catalog = {catalog!r}: file does not exist")
        _check_catalog(base / catalog)


def _check_per_tile_year(config: dict[str, Any], base: Path, produced: set[str], key: str) -> None:
    """The file ``assess.KEY`` names (a pattern with {tile} and {year}) exists for every tile-year, or will."""
    pattern = (config.get("assess") or {}).get(key)
    if not pattern:
        return
    for tile in config["tiles"]:
        for year in config["years"]:
            p = pattern.format(tile=tile, year=year)
            if p not in produced and not (base / p).exists():
                raise BadValue(
                    ("assess", key), f"assess.{key} ({tile} {year}) = {p!r}: file does not exist"
                )


def _check_hpo(config: dict[str, Any]) -> None:
    """Tuned models are trained models; every search space names parameters of its model, in range."""
    from lcflow.tune import space as search_space

    hpo = config.get("hpo") or {}
    for i, model in enumerate(hpo.get("models") or []):
        if model not in (config.get("models") or []):
            raise BadValue(
                ("hpo", "models", i),
                f"hpo.models[{i}] = {model!r} is not one of models {config.get('models') or []} "
                "(a tuned model must also be trained)",
            )
    for model, space in (hpo.get("space") or {}).items():
        try:
            search_space.parse(model, space, where=f"hpo.space.{model}")
        except hyperparameters.ParamError as exc:
            raise BadValue(
                ("hpo", "space", model) + ((exc.key,) if exc.key else ()), str(exc)
            ) from None


def _check_blend(config: dict[str, Any], schema: dict[str, Any]) -> None:
    """A blend's members are trained and mapped models."""
    if "blend" not in (config.get("models") or []):
        return
    given = (config.get("blend") or {}).get("members")
    members = given or schema["properties"]["blend"]["properties"]["members"]["default"]
    for i, model in enumerate(members):
        if model not in (config.get("models") or []):
            key = ("blend", "members", i) if given else ("models",)
            raise BadValue(
                key,
                f"blend.members[{i}] = {model!r}{'' if given else ' (by default)'} is not one of models "
                f"{config.get('models') or []} (a blend averages the maps of trained models)",
            )


def _check_catalog(path: Path) -> None:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadValue(
            ("stac", "catalog"), f"stac.catalog = {str(path)!r} is not a JSON STAC catalog ({exc})"
        ) from None
    if not isinstance(data, dict) or data.get("type") not in ("Catalog", "Collection"):
        raise BadValue(
            ("stac", "catalog"),
            f"stac.catalog = {str(path)!r} is not a STAC catalog (its type is "
            f"{data.get('type') if isinstance(data, dict) else type(data).__name__!r}, not Catalog or Collection)",
        )


def _check_labels(base: Path, config: dict[str, Any], key: str) -> None:
    """Before any job: the label source is readable, covers each configured tile area, and every code it holds
    there is mapped or ignored by the nomenclature; the change layer, when given, is readable."""
    from lcflow.labels import alignment as labels
    from lcflow.labels import nomenclature
    from lcflow.labels import vector as vector_labels

    cfg = config["labels"]
    try:
        nomen = nomenclature.load(
            cfg.get("level", 2),
            str(base / cfg["mapping"]) if cfg.get("mapping") else None,
            clc_codes=key == "corine",
        )
    except LcflowError as exc:
        raise BadValue(("labels", "mapping"), f"labels.mapping: {exc}") from None
    source = labels.LabelSource(
        base / cfg[key],
        corine=key == "corine",
        code_column=cfg.get("code_column"),
        layer=cfg.get("layer"),
        resampling=cfg.get("resampling", "auto"),
    )
    unlabelled = labels.Unlabelled(
        cfg.get("unlabelled_warn", labels.Unlabelled.warn),
        cfg.get("unlabelled_max", labels.Unlabelled.max),
    )
    aoi = config.get("aoi") or {}
    for tile in config["tiles"]:
        area = aoi.get(tile) or mgrs.tile_bounds(tile)
        try:
            present = labels.codes_in_area(source, mgrs.tile_epsg(tile), area, where=f"tile {tile}")
            nomen.check_covers(present, f"{source.path} in tile {tile}")
            unlabelled.check(
                labels.unlabelled_share(source, mgrs.tile_epsg(tile), area, f"tile {tile}"),
                source,
                f"the area of tile {tile}",
            )
        except LcflowError as exc:
            raise BadValue(("labels", key), f"labels.{key}: {exc}") from None
    change = cfg.get("change")
    if change and vector_labels.is_vector(change):
        try:
            vector_labels.open_layer(base / change, cfg.get("change_layer"), "labels.change_layer")
        except LcflowError as exc:
            raise BadValue(("labels", "change"), f"labels.change: {exc}") from None


def demo_outputs(config: dict[str, Any]) -> set[str]:
    """Files the demo's synth rule writes, so they count as inputs that will exist."""
    if "demo" not in config:
        return set()
    out = config["demo"].get("out", "resources/demo")
    files = {f"{out}/catalog/catalog.json", f"{out}/corine/clc_demo_3035.tif"}
    files |= {f"{out}/truth/{t}_{y}.tif" for t in config["tiles"] for y in config["years"]}
    return files
