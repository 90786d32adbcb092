"""lcflow: land-cover maps from Sentinel-2 time series, from a laptop to a multi-node Slurm cluster."""

from pathlib import Path

from snakemake.utils import min_version, validate

from lcflow import config as lcflow_config
from lcflow.common import dry_run as lcflow_dry_run
from lcflow.errors import LcflowError

min_version("9.0")


# The demo's config only when no --configfile is given: a user's config replaces it, never merges into it.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


SCHEMA = Path(str(workflow.current_basedir)) / "workflow" / "schemas" / "config.schema.yaml"
CONFIG_SOURCES = workflow.overwrite_configfiles or workflow.configfiles
try:
    lcflow_config.unset_nulls(config)  # `key: null` in a layered config unsets what a file below set
    lcflow_config.check(
        config,
        SCHEMA,
        origins=lcflow_config.Origins(CONFIG_SOURCES, workflow.config_settings.config),
    )
except LcflowError as exc:
    raise SystemExit(f"lcflow: {exc}") from None
validate(config, str(SCHEMA))


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/synth.smk"
include: "workflow/rules/retrieve.smk"
include: "workflow/rules/labels.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/maps.smk"
include: "workflow/rules/assess.smk"
include: "workflow/rules/job_resources.smk"
include: "workflow/rules/targets.smk"


# Bookkeeping rules of a second or two (figures of a study or a training, STAC items, tables of what ran)
# run where Snakemake runs, on the login node under profiles/slurm, rather than each as a Slurm job that
# waits longer for its queue and start-up than it computes. Every rule that reads a cube or a map in full,
# trains or predicts stays a cluster job.
localrules:
    all,
    hpo_summary,
    learning_curve,
    quicklook,
    change_figure,
    change_summary,
    summary,
    compare_models,
    stac_map_item,
    stac_change_item,
    stac_catalog,
    job_resources,


rule all:
    default_target: True
    input:
        PRODUCTS,
        KEPT,


# Snakemake's dry run lists every job as "rule", local or not (it does not decide where jobs run): under a
# Slurm profile (one that names an account) the rules that will run here are named once (lcflow.common.dry_run)
if lcflow_dry_run.asked(sys.argv[1:]) and launch.account_of(workflow.resource_settings.default_resources) is not None:
    print(lcflow_dry_run.local_rules_said(workflow.rules, workflow._localrules), file=sys.stderr)
