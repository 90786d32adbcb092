# What a plain run makes and keeps: every output of every job but the temporary ones, as rule all's inputs
# (after every rules file, whose rules it names).

from snakemake.io import is_flagged, strip_wildcard_constraints


def kept(name, when=True, **values):
    """The outputs of rule ``name`` that a run keeps (not temporary), for every combination of ``values``.

    Snakemake makes a missing file again only where something asks for it: an intermediate file that a
    failed or cancelled job left missing (its old copy deleted before the job) is otherwise passed over,
    the products made from it being there. As targets of rule all every one is made again by a plain
    rerun, and what was made from it after it."""
    if not when or not all(values.values()):  # a model list that is empty: nothing of the rule's
        return []
    outputs = [strip_wildcard_constraints(str(f)) for f in workflow.get_rule(name).output if not is_flagged(f, "temp")]
    return expand(outputs, **values)


WORKERS = range(HPO.get("workers", 1))
KEPT = [
    *kept("synth_scenes", "demo" in config, tile=TILES, year=YEARS),
    *kept("synth_corine", "demo" in config),
    *kept("synth_catalog", "demo" in config),
    *kept("label_reference", DEMO_REFERENCE, tile=TILES, year=YEARS),
    *kept("search", tile=TILES, year=YEARS),
    *kept("stage", STAGE_MODE != "remote", tile=TILES, year=YEARS),
    *kept("cube", tile=TILES, year=YEARS),
    *kept("labels", bool(LABELS), tile=TILES),
    *kept("sample", bool(LABELS), tile=TILES, year=YEARS),
    *kept("hpo_rf", "rf" in TUNED, worker=WORKERS),
    *kept("hpo", model=[m for m in TUNED if m != "rf"], worker=WORKERS),
    *kept("hpo_summary", model=TUNED),
    *kept("train_rf", "rf" in MODELS),
    *kept("train", model=DEEP_MODELS),
    *kept("blend", "blend" in MODELS),
    *kept("learning_curve", model=DEEP_MODELS),
    *kept("predict", tile=TILES, year=YEARS, model=DEEP_MODELS),
    *kept("predict_rf", "rf" in MODELS, tile=TILES, year=YEARS, model=["rf"]),
    *kept("predict_blend", "blend" in MODELS, tile=TILES, year=YEARS),
    *kept("consistent_maps", tile=TILES, model=MODELS),
    *kept("design_sample", bool(MODELS), tile=TILES, year=YEARS),
    *kept("assess", tile=TILES, year=YEARS, model=MODELS),
    *kept("quicklook", tile=TILES, year=YEARS, model=MODELS),
    *kept("change_figure", tile=TILES, pair=PAIRS, model=MODELS),
    *kept("stac_map_item", tile=TILES, year=YEARS, model=MODELS),
    *kept("stac_change_item", tile=TILES, pair=PAIRS, model=MODELS),
    *kept("summary", bool(MODELS)),
    *kept("compare_models", bool(MODELS)),
    *kept("change_summary", bool(MODELS)),
    *kept("stac_catalog", bool(MODELS)),
    *kept("job_resources"),
]
