import json

from snakemake.exceptions import WorkflowError

from lcflow import launch

R = config["results"]
TILES = config["tiles"]
YEARS = config["years"]
MODELS = config["models"]
DEEP_MODELS = [m for m in MODELS if m != "rf"]
ENV = "../../envs/lcflow.yaml"
LABELS = config["labels"]
TRUTH = (config.get("assess") or {}).get("truth")


def all_cores():
    """Every core of a local run; a cluster run has no total, its profile sets threads per rule."""
    try:
        return workflow.cores
    except WorkflowError:
        return 1


CORES = all_cores()


wildcard_constraints:
    tile=r"(0[1-9]|[1-5][0-9]|60)[C-HJ-NP-X][A-HJ-NP-Z][A-HJ-NP-V]",
    year=r"\d{4}",
    model=r"[a-z][a-z0-9_]*",


def nomenclature_args():
    """CLI options naming the label nomenclature, shared by labels and assess."""
    mapping = LABELS.get("mapping")
    return f"--mapping {mapping}" if mapping else f"--level {LABELS.get('level', 2)}"


def model_sets(model):
    """--set options for a model's configured parameters."""
    params = (config.get("model_params") or {}).get(model) or {}
    return " ".join(f"--set {k}={json.dumps(v)}" for k, v in params.items())


def aoi_args(wildcards):
    """--bounds of the configured area of a tile; none processes the whole tile."""
    bounds = (config.get("aoi") or {}).get(wildcards.tile)
    return f"--bounds {','.join(map(str, bounds))}" if bounds else ""


def truth_input(wildcards):
    """The truth raster of a tile-year where one is configured (the demo)."""
    return {"truth": TRUTH.format(tile=wildcards.tile, year=wildcards.year)} if TRUTH else {}
