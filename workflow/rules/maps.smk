# Each year is mapped on its own (maps/raw); the maps a user receives (maps/) are the consistent series
# of all years, made from every year's class probabilities.
# A deep model's map is a distributed job like its training (lcflow.launch): the ranks share the
# cube's windows, each on its own GPU, and one set of files is published. The forest's (predict_rf) is the
# same command in one process: its own rule, so that a profile gives it CPU resources.
rule predict:
    input:
        model=f"{R}/models/{{model}}/model.json",
        cube=f"{R}/{{tile}}/{{year}}/cube.tif",
    output:
        map=f"{R}/maps/raw/{{tile}}_{{year}}_{{model}}.tif",
        confidence=f"{R}/maps/raw/{{tile}}_{{year}}_{{model}}_confidence.tif",
        probabilities=temp(f"{R}/maps/raw/{{tile}}_{{year}}_{{model}}_probabilities.tif"),
        timing=f"{R}/maps/raw/{{tile}}_{{year}}_{{model}}_timing.json",
    log:
        f"{R}/logs/predict/{{tile}}_{{year}}_{{model}}.log",
    benchmark:
        f"{R}/benchmarks/predict/{{tile}}_{{year}}_{{model}}.tsv"
    wildcard_constraints:
        model="|".join(DEEP_MODELS) or "none",
    params:
        model_dir=subpath(input.model, parent=True),
        block=config["predict"]["block_px"],
        launcher=ranks_launcher("predict", f"{R}/benchmarks/predict/{{tile}}_{{year}}_{{model}}.tsv"),
        backend=BACKEND,
        rendezvous=RENDEZVOUS,
    resources:
        ranks=1,
    conda:
        ENV
    shell:
        "{params.launcher} lcflow -v predict --model-dir {params.model_dir:q} --cube {input.cube:q} --out {output.map:q}"
        " --confidence {output.confidence:q} --probabilities {output.probabilities:q} --block {params.block}"
        " --timing {output.timing:q} --backend {params.backend} {params.rendezvous} > {log:q} 2>&1"


use rule predict as predict_rf with:
    wildcard_constraints:
        model="rf",


# A blend's map of a tile-year: the mean of its members' stored probabilities, window by window (about
# 3 M px/s on 2 cores), so no member maps the cube twice; its timing adds the members' mapping time.
rule predict_blend:
    input:
        model=f"{R}/models/blend/model.json",
        probabilities=expand(
            f"{R}/maps/raw/{{tile}}_{{year}}_{{member}}_probabilities.tif", member=BLEND_MEMBERS, allow_missing=True
        ),
        timings=expand(f"{R}/maps/raw/{{tile}}_{{year}}_{{member}}_timing.json", member=BLEND_MEMBERS, allow_missing=True),
    output:
        map=f"{R}/maps/raw/{{tile}}_{{year}}_blend.tif",
        confidence=f"{R}/maps/raw/{{tile}}_{{year}}_blend_confidence.tif",
        probabilities=temp(f"{R}/maps/raw/{{tile}}_{{year}}_blend_probabilities.tif"),
        timing=f"{R}/maps/raw/{{tile}}_{{year}}_blend_timing.json",
    log:
        f"{R}/logs/predict/{{tile}}_{{year}}_blend.log",
    benchmark:
        f"{R}/benchmarks/predict/{{tile}}_{{year}}_blend.tsv"
    params:
        model_dir=subpath(input.model, parent=True),
        block=config["predict"]["block_px"],
    conda:
        ENV
    shell:
        "lcflow -v blend-maps --model-dir {params.model_dir:q} --member-probabilities {input.probabilities:q}"
        " --member-timings {input.timings:q} --out {output.map:q} --confidence {output.confidence:q}"
        " --probabilities {output.probabilities:q} --timing {output.timing:q} --block {params.block} > {log:q} 2>&1"


rule consistent_maps:
    input:
        probabilities=expand(
            f"{R}/maps/raw/{{tile}}_{{year}}_{{model}}_probabilities.tif", year=SERIES, allow_missing=True
        ),
        truth=series_truth,
    output:
        maps=expand(f"{R}/maps/{{tile}}_{{year}}_{{model}}.tif", year=SERIES, allow_missing=True),
        confidence=expand(f"{R}/maps/{{tile}}_{{year}}_{{model}}_confidence.tif", year=SERIES, allow_missing=True),
        changes=expand(f"{R}/changes/{{tile}}_{{pair}}_{{model}}.tif", pair=PAIRS, allow_missing=True),
        summary=f"{R}/changes/{{tile}}_{{model}}.json",
    log:
        f"{R}/logs/consistent_maps/{{tile}}_{{model}}.log",
    benchmark:
        f"{R}/benchmarks/consistent_maps/{{tile}}_{{model}}.tsv"
    params:
        years=SERIES,
        changes=lambda wc, output: f"--changes {' '.join(shlex.quote(c) for c in output.changes)}" if PAIRS else "",
        truth=lambda wc, input: f"--truth {' '.join(shlex.quote(t) for t in input.truth)}" if input.truth else "",
        settings=json.dumps(CONSISTENCY, sort_keys=True),
        nomenclature=nomenclature_args(),
        block=config["predict"]["block_px"],
    conda:
        ENV
    shell:
        "lcflow -v consistent-maps --probabilities {input.probabilities:q} --years {params.years}"
        " --out {output.maps:q} --confidence {output.confidence:q} {params.changes} --summary {output.summary:q}"
        " --settings {params.settings:q} {params.truth}"
        " {params.nomenclature} --block {params.block} > {log:q} 2>&1"


# What is made for people to look at and for catalogues (lcflow.maps.quicklook, lcflow.maps.stac_items):
# quicklooks and change figures for the report, the change table, STAC items and their catalogue.


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
