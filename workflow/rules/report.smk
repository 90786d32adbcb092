# What is made for people to look at and for catalogues (lcflow.maps.quicklook, lcflow.maps.stac_items,
# lcflow.job_resources): quicklooks and change figures for the report, the change table, STAC items and
# their catalogue, and what each job took.


rule quicklook:
    input:
        map=f"{R}/maps/{{tile}}_{{year}}_{{model}}.tif",
        confidence=f"{R}/maps/{{tile}}_{{year}}_{{model}}_confidence.tif",
    output:
        report(
            f"{R}/quicklooks/{{tile}}_{{year}}_{{model}}.quicklook.png",
            caption="../report/quicklook.rst",
            category="Maps",
            subcategory="{model}",
            labels={"tile": "{tile}", "year": "{year}", "model": "{model}"},
        ),
    log:
        f"{R}/logs/quicklook/{{tile}}_{{year}}_{{model}}.log",
    benchmark:
        f"{R}/benchmarks/quicklook/{{tile}}_{{year}}_{{model}}.tsv"
    conda:
        ENV
    shell:
        "lcflow -v quicklook --map {input.map:q} --confidence {input.confidence:q} --out {output:q} > {log:q} 2>&1"

rule change_figure:
    input:
        change=f"{R}/changes/{{tile}}_{{pair}}_{{model}}.tif",
        summary=f"{R}/changes/{{tile}}_{{model}}.json",
    output:
        report(
            f"{R}/changes/{{tile}}_{{pair}}_{{model}}.png",
            caption="../report/change.rst",
            category="Change",
            subcategory="{model}",
            labels={"tile": "{tile}", "years": "{pair}", "model": "{model}"},
        ),
    log:
        f"{R}/logs/change_figure/{{tile}}_{{pair}}_{{model}}.log",
    benchmark:
        f"{R}/benchmarks/change_figure/{{tile}}_{{pair}}_{{model}}.tsv"
    params:
        title="{tile} {model}",
    conda:
        ENV
    shell:
        "lcflow -v change-figure --change {input.change:q} --summary {input.summary:q} --title {params.title:q}"
        " --out {output:q} > {log:q} 2>&1"

rule change_summary:
    input:
        expand(f"{R}/changes/{{tile}}_{{model}}.json", tile=TILES, model=MODELS),
    output:
        report(f"{R}/changes.tsv", caption="../report/changes.rst", category="Change"),
    log:
        f"{R}/logs/change_summary.log",
    conda:
        ENV
    shell:
        "lcflow -v summarize-changes --summaries {input:q} --out {output:q} > {log:q} 2>&1"

rule stac_map_item:
    input:
        map=f"{R}/maps/{{tile}}_{{year}}_{{model}}.tif",
        confidence=f"{R}/maps/{{tile}}_{{year}}_{{model}}_confidence.tif",
        model=f"{R}/models/{{model}}/model.json",
        manifest=f"{R}/{{tile}}/{{year}}/items.json",
        assessment=f"{R}/assessment/{{tile}}_{{year}}_{{model}}.json",
        quicklook=f"{R}/quicklooks/{{tile}}_{{year}}_{{model}}.quicklook.png",
    output:
        f"{R}/maps/{{tile}}_{{year}}_{{model}}.stac.json",
    log:
        f"{R}/logs/stac/{{tile}}_{{year}}_{{model}}.log",
    params:
        model_dir=subpath(input.model, parent=True),
        catalog=f"{R}/stac/catalog.json",
    conda:
        ENV
    shell:
        "lcflow -v stac-item --map {input.map:q} --confidence {input.confidence:q} --tile {wildcards.tile}"
        " --year {wildcards.year} --model-dir {params.model_dir:q} --manifest {input.manifest:q}"
        " --assessment {input.assessment:q} --quicklook {input.quicklook:q} --catalog {params.catalog:q}"
        " --out {output:q} > {log:q} 2>&1"

rule stac_change_item:
    input:
        change=f"{R}/changes/{{tile}}_{{pair}}_{{model}}.tif",
        summary=f"{R}/changes/{{tile}}_{{model}}.json",
    output:
        f"{R}/changes/{{tile}}_{{pair}}_{{model}}.stac.json",
    log:
        f"{R}/logs/stac/{{tile}}_{{pair}}_{{model}}.log",
    params:
        catalog=f"{R}/stac/catalog.json",
    conda:
        ENV
    shell:
        "lcflow -v stac-item --change {input.change:q} --summary {input.summary:q} --tile {wildcards.tile}"
        " --model {wildcards.model} --catalog {params.catalog:q} --out {output:q} > {log:q} 2>&1"

rule stac_catalog:
    input:
        expand(f"{R}/maps/{{tile}}_{{year}}_{{model}}.stac.json", tile=TILES, year=SERIES, model=MODELS),
        expand(f"{R}/changes/{{tile}}_{{pair}}_{{model}}.stac.json", tile=TILES, pair=PAIRS, model=MODELS),
    output:
        f"{R}/stac/catalog.json",
    log:
        f"{R}/logs/stac/catalog.log",
    conda:
        ENV
    shell:
        "lcflow -v stac-catalog --items {input:q} --out {output:q} > {log:q} 2>&1"

# What each job took (Snakemake's benchmark files): users size their Slurm requests from it. It runs after
# every product of the run (PRODUCTS), so every job's benchmark file is there.
rule job_resources:
    input:
        PRODUCTS,
    output:
        table=report(f"{R}/job_resources.tsv", caption="../report/job_resources.rst", category="Resources"),
        figure=report(f"{R}/job_resources.png", caption="../report/job_resources.rst", category="Resources"),
    log:
        f"{R}/logs/job_resources.log",
    params:
        benchmarks=f"{R}/benchmarks",
    conda:
        ENV
    shell:
        "lcflow -v job-resources --benchmarks {params.benchmarks:q} --out {output.table:q} --figure {output.figure:q}"
        " > {log:q} 2>&1"
