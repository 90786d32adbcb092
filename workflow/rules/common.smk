import json
import os
import shlex
import sys

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod, ExecMode

from lcflow import launch, run_lock, site_values
from lcflow.common import rank_usage, stale_products
from lcflow.train import models
from lcflow.train.parallel import backend_check
from lcflow.retrieve.remote import is_url
from lcflow.tune.hpo_settings import HpoSettings

R = config["results"]
TILES = config["tiles"]
YEARS = config["years"]
# without labels and models (they go together) a run builds the cubes only
MODELS = config.get("models") or []
DEEP_MODELS = [m for m in MODELS if m in models.DEEP]
# a blend (lcflow.train.model_dirs.blend) averages its members' probabilities: it trains nothing, and its maps are
# made from the members' stored probabilities
BLEND_MEMBERS = (config.get("blend") or {}).get("members") or ["rf", "tempcnn"]
ENV = "../../envs/lcflow.yaml"
LABELS = config.get("labels") or {}
LABEL_YEAR = int(LABELS.get("year") or YEARS[0])
TRUTH = (config.get("assess") or {}).get("truth")
SERIES = sorted(YEARS)  # the years of a tile's consistent map series, in time order
PAIRS = [f"{a}_{b}" for a, b in zip(SERIES, SERIES[1:])]  # consecutive years: one change map each
CONSISTENCY = config["consistency"]
BACKEND = config["distributed"]["backend"]  # how the ranks of a deep model's jobs talk: horovod or torch
# how long a torch rank waits for the others at start-up before it ends the job
RENDEZVOUS = f"--rendezvous-minutes {config['distributed'].get('rendezvous_minutes', 5)}"


def all_cores():
    """Every core of a local run; a cluster run has no total, its profile sets threads per rule."""
    try:
        return workflow.cores
    except WorkflowError:
        return 1


CORES = all_cores()


# Every rule runs the tools of the environment Snakemake itself runs in (lcflow, horovodrun, mpirun of the
# same virtualenv or conda environment), whatever PATH the shell that started Snakemake had: so that
# `.venv/bin/snakemake ...` works from a shell with no environment activated. Snakemake removes a job's old
# outputs before the job starts, so a command that cannot start is found before any job runs (onstart: a
# real run, not a dry run, which plans on a laptop or a login node without the launchers).
TOOLS = str(Path(sys.executable).parent)
JOB_PATH = f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}"
QUOTED_TOOLS = shlex.quote(TOOLS).replace("{", "{{").replace("}", "}}")  # shell.prefix is formatted as a rule's shell
# A site's set-up of every job (the Slurm profile's JOB_SETUP: modules to load, the network's variables)
# runs first, in the job's shell on its node, so that the ranks a job starts inherit it; then this
# environment's tools go first on PATH. Module scripts read unset variables: -u is off while it runs.
JOB_SETUP = 'if [ -n "${{LCFLOW_JOB_SETUP:-}}" ]; then set +u; eval "$LCFLOW_JOB_SETUP"; set -u; fi; '
# A site's container (the Slurm profile's CONTAINER, `apptainer exec --nv IMAGE`): every lcflow command of a
# job runs in the image (a shell function; the launchers put it before each rank's lcflow themselves)
CONTAINER = os.environ.get("LCFLOW_CONTAINER", "").strip()
IN_CONTAINER = 'if [ -n "${{LCFLOW_CONTAINER:-}}" ]; then lcflow() {{ $LCFLOW_CONTAINER lcflow "$@"; }}; fi; '
# With --software-deployment-method conda, the jobs run in envs/lcflow.yaml's environment (Horovod built
# by its post-deploy script) and find its tools first on PATH themselves
IN_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
OWN_TOOLS = "" if IN_CONDA else f'export PATH={QUOTED_TOOLS}:"$PATH"; '
shell.prefix(f'set -euo pipefail; {JOB_SETUP}{OWN_TOOLS}{IN_CONTAINER}')

LAUNCHERS = launch.configured_launchers(workflow.resource_settings.overwrite_resources, BACKEND)
# what reaches a shell line from the profile (the container, the job set-up, the launchers, the extra sbatch
# options) is data: shell text in it is refused before any job is queued (lcflow/site_values.py)
try:
    site_values.check_job_values(os.environ, LAUNCHERS, site_values.slurm_extras(workflow.resource_settings))
except LcflowError as exc:
    raise SystemExit(f"lcflow: {exc}") from None
MISSING = [] if IN_CONDA else launch.missing_programs(["lcflow", *LAUNCHERS, *([CONTAINER] if CONTAINER else [])],
                                                       JOB_PATH)
# a deep model's ranks load the backend: a missing one is named now, in a dry run too, not once a job has
# waited in a GPU queue (a profile that starts no ranks runs every model as one process, which loads neither)
if DEEP_MODELS and LAUNCHERS and not IN_CONDA and (BACKEND_PROBLEM := backend_check.problem(BACKEND, container=CONTAINER)):
    raise SystemExit(f"lcflow: {BACKEND_PROBLEM}")
# a killed controller's lock, said by the controller (its dry run, or before a real run's LockException), not
# by its jobs, and not by the --unlock that clears it
if workflow.exec_mode == ExecMode.DEFAULT and "--unlock" not in sys.argv and (STALE_LOCK := run_lock.stale_lock()):
    print(STALE_LOCK, file=sys.stderr)
# a dropped tile's (year's, model's) maps stay where a person looks for the current ones: named, not removed
if workflow.exec_mode == ExecMode.DEFAULT and (STALE := stale_products.said(
        Path(R), stale_products.find(Path(R), config["tiles"], config["years"], config.get("models") or []))):
    print(STALE, file=sys.stderr)
if launch.account_of(workflow.resource_settings.default_resources) == launch.PLACEHOLDER_ACCOUNT:
    print(f"lcflow: warning: the Slurm profile's account is the placeholder {launch.PLACEHOLDER_ACCOUNT!r}; a real "
          "run refuses it (set ACCOUNT in profiles/slurm/config.yaml or LCFLOW_SLURM_ACCOUNT)", file=sys.stderr)


onstart:
    try:
        launch.check_before_jobs(MISSING, sys.executable, getattr(workflow.executor_plugin, "name", None),
                                 workflow.resource_settings.default_resources)
    except LcflowError as exc:
        raise SystemExit(f"lcflow: {exc}") from None


wildcard_constraints:
    tile=r"(0[1-9]|[1-5][0-9]|60)[C-HJ-NP-X][A-HJ-NP-Z][A-HJ-NP-V]",
    year=r"\d{4}",
    model=r"[a-z][a-z0-9_]*",
    pair=r"\d{4}_\d{4}",


# Values from the config reach a job as data: paths and values in a rule's shell are quoted ({x:q}),
# options built here are quoted with shlex; launcher strings, from the profiles, are the only command
# lines.


def ranks_launcher(rule_name, benchmark):
    """The launcher of a rule's processes (lcflow.launch) from its resources; its ranks write their own
    CPU time and memory beside the job's ``benchmark`` file (lcflow.common.rank_usage: under Slurm the
    benchmark sees srun, not the ranks)."""

    def launcher(wildcards, resources):
        usage = rank_usage.folder(benchmark.format(**dict(wildcards.items())))
        return launch.command(resources, rule=rule_name, backend=BACKEND, container=CONTAINER, usage=usage)

    return launcher


LABEL_SOURCE = "reference" if LABELS.get("reference") else "corine"


def label_inputs(wildcards):
    """The label source (and the change layer), as the labels rule's inputs."""
    files = {"source": LABELS[LABEL_SOURCE]}
    if LABELS.get("change"):
        files["change"] = LABELS["change"]
    return files


def label_source_args(wildcards, input):
    """CLI options naming the label source and how to read it."""
    args = [f"--{LABEL_SOURCE} {shlex.quote(input.source)}"]
    for key in ("code_column", "layer", "change_layer"):
        if LABELS.get(key):
            args.append(f"--{key.replace('_', '-')} {shlex.quote(str(LABELS[key]))}")
    if "change" in input.keys():
        args.append(f"--change {shlex.quote(input.change)}")
    return " ".join(args)


def nomenclature_args():
    """CLI options naming the label nomenclature, shared by labels and assess: a mapping of the user's own
    reference codes is read as such by every command."""
    mapping = LABELS.get("mapping")
    if not mapping:
        return f"--level {int(LABELS.get('level', 2))}"
    return f"--mapping {shlex.quote(mapping)}" + (" --own-codes" if LABEL_SOURCE == "reference" else "")


def model_params(model):
    """A model's configured parameters as one JSON argument (checked before any job ran)."""
    return json.dumps((config.get("model_params") or {}).get(model) or {})


def aoi_args(wildcards):
    """--bounds of the configured area of a tile; none processes the whole tile."""
    bounds = (config.get("aoi") or {}).get(wildcards.tile)
    return f"--bounds {shlex.quote(','.join(map(str, bounds)))}" if bounds else ""


def series_truth(wildcards):
    """The truth rasters of every year of a tile (the demo), for the consistent maps' scores."""
    return [TRUTH.format(tile=wildcards.tile, year=y) for y in SERIES] if TRUTH else []


def truth_input(wildcards):
    """The truth raster of a tile-year where one is configured (the demo)."""
    return {"truth": TRUTH.format(tile=wildcards.tile, year=wildcards.year)} if TRUTH else {}


ASSESS = config.get("assess") or {}
DESIGN = ASSESS.get("design") or {}
DESIGN_MODEL = DESIGN.get("model") or (MODELS or ["none"])[0]
REFERENCE = ASSESS.get("reference")
# the demo labels its reference design from the truth rasters, as a user would label the points
DEMO_REFERENCE = not REFERENCE and "demo" in config and bool(TRUTH)


def reference_input(wildcards):
    """The labelled reference points of a tile-year, where there are any: a tile-year not labelled yet is
    assessed without, and again once its file is there (its input changes)."""
    if REFERENCE:
        labelled = REFERENCE.format(tile=wildcards.tile, year=wildcards.year)
        return {"reference": labelled} if Path(labelled).exists() else {}
    if DEMO_REFERENCE:
        return {"reference": f"{R}/reference/{wildcards.tile}_{wildcards.year}_labelled.gpkg"}
    return {}


def reference_option(wildcards, input):
    if "reference" not in input.keys():
        return ""
    return f"--reference {shlex.quote(input.reference)} --reference-column {shlex.quote(ASSESS.get('reference_column', 'reference'))}"


HPO = config.get("hpo") or {}
HPO_SETTINGS = HpoSettings.from_config(HPO)
TUNED = HPO.get("models") or []


def tuned_input(wildcards):
    """The study's best parameters where the model is tuned: the final training takes them
    (train_rf has no model wildcard: it trains rf)."""
    model = getattr(wildcards, "model", "rf")
    return {"tuned": f"{R}/hpo/{model}/best_params.yaml"} if model in TUNED else {}


def tuned_option(wildcards, input):
    return f"--tuned {shlex.quote(input.tuned)}" if "tuned" in input.keys() else ""


ALL_SAMPLES = expand(f"{R}/{{tile}}/{{year}}/samples.parquet", tile=TILES, year=YEARS)


def reference_cube(wildcards):
    """The cube of the year the labels show, for a sample table of another year (label transfer)."""
    if int(wildcards.year) == LABEL_YEAR or not config["sample"]["transfer"]["mad_k"]:
        return {}
    return {"reference": f"{R}/{wildcards.tile}/{LABEL_YEAR}/cube.tif"}


# Everything a run delivers (rule all); the job_resources table, made last, reads every job's benchmark file.
# A run of the cubes alone delivers them.
PRODUCTS = expand(f"{R}/{{tile}}/{{year}}/cube.tif", tile=TILES, year=YEARS) if not MODELS else [
    f"{R}/accuracy.tsv",
    f"{R}/model_comparison.tsv",
    f"{R}/changes.tsv",
    f"{R}/stac/catalog.json",
    *expand(f"{R}/changes/{{tile}}_{{pair}}_{{model}}.png", tile=TILES, pair=PAIRS, model=MODELS),
    *expand(f"{R}/maps/{{tile}}_{{year}}_{{model}}.tif", tile=TILES, year=YEARS, model=MODELS),
    *expand(f"{R}/reference/{{tile}}_{{year}}_design.gpkg", tile=TILES, year=YEARS),
    *expand(f"{R}/quicklooks/{{tile}}_{{year}}_{{model}}.quicklook.png", tile=TILES, year=YEARS, model=MODELS),
    *expand(f"{R}/models/{{model}}/learning_curve.png", model=DEEP_MODELS),
]


STAGE_MODE = config["stage"]["mode"]
# the search and the stage-in read the network: where Snakemake runs (the login node) or, on a site whose
# data-mover partition has the network, as jobs there (docs/slurm.md)
NETWORK_ON_HOST = config["stage"]["where"] == "host"
NETWORK_JOB = (
    {"slurm_partition": config["stage"]["slurm_partition"]}
    if not NETWORK_ON_HOST and config["stage"]["slurm_partition"]
    else {}
)


def cube_manifest(wildcards):
    """The manifest a cube reads: the staged copies' (stage.mode auto or fetch), else the search's."""
    name = "items.json" if STAGE_MODE == "remote" else "staged.json"
    return f"{R}/{wildcards.tile}/{wildcards.year}/{name}"


def staged_manifest(path):
    """The stage-in's manifest: kept, or (stage.keep: false) removed with its scenes once the cube is built."""
    return path if config["stage"]["keep"] else temp(path)


def unstage(wildcards):
    """The cube's option that removes its staged scenes once it is built (stage.keep: false)."""
    if config["stage"]["keep"] or STAGE_MODE == "remote":
        return ""
    return f"--unstage {shlex.quote(config['stage']['dir'])}"


def search_catalog(wildcards):
    """The local catalogue a tile-year's search reads: the demo's own catalogue of that tile-year (so that
    adding a year searches the new year alone), else stac.catalog; none for a remote one (the demo's too,
    served over http)."""
    if "demo" in config and not is_url(config["stac"].get("catalog") or ""):
        return [f"{config['demo']['out']}/catalog/{wildcards.tile}_{wildcards.year}/catalog.json"]
    return [config["stac"]["catalog"]] if config["stac"].get("catalog") and not is_url(config["stac"]["catalog"]) else []


def search_source(wildcards, input):
    return f"--catalog {shlex.quote(input[0])}" if input else (
        f"--catalog {shlex.quote(config['stac']['catalog'])}" if config["stac"].get("catalog") else f"--api {shlex.quote(config['stac']['api'])}")
