"""lcflow: land-cover maps from Sentinel-2 time series, from a laptop to a multi-node Slurm cluster."""

from pathlib import Path

from snakemake.utils import min_version, validate

from lcflow import config as lcflow_config
from lcflow.errors import LcflowError

min_version("9.0")


configfile: "config/config.yaml"


SCHEMA = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
try:
    lcflow_config.check(config, SCHEMA)
except LcflowError as exc:
    raise SystemExit(f"lcflow: {exc}") from None
validate(config, str(SCHEMA))


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/demo.smk"
include: "workflow/rules/retrieve.smk"
include: "workflow/rules/labels.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/map.smk"


rule all:
    default_target: True
    input:
        f"{R}/accuracy.tsv",
        expand(f"{R}/maps/{{tile}}_{{year}}_{{model}}.tif", tile=TILES, year=YEARS, model=MODELS),
