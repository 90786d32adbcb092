rule predict:
    input:
        model=f"{R}/models/{{model}}/model.json",
        cube=f"{R}/{{tile}}/{{year}}/cube.tif",
    output:
        map=f"{R}/maps/{{tile}}_{{year}}_{{model}}.tif",
        confidence=f"{R}/maps/{{tile}}_{{year}}_{{model}}_confidence.tif",
    log:
        f"{R}/logs/predict/{{tile}}_{{year}}_{{model}}.log",
    params:
        model_dir=subpath(input.model, parent=True),
        block=config["predict"]["block_px"],
    conda:
        ENV
    shell:
        "lcflow -v predict --model-dir {params.model_dir:q} --cube {input.cube:q} --out {output.map:q}"
        " --confidence {output.confidence:q} --block {params.block} > {log:q} 2>&1"


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
    conda:
        ENV
    shell:
        "lcflow -v quicklook --map {input.map:q} --confidence {input.confidence:q} --out {output:q} > {log:q} 2>&1"


rule design_sample:
    input:
        map=f"{R}/maps/{{tile}}_{{year}}_{DESIGN_MODEL}.tif",
    output:
        gpkg=f"{R}/reference/{{tile}}_{{year}}_design.gpkg",
        csv=f"{R}/reference/{{tile}}_{{year}}_design.csv",
    log:
        f"{R}/logs/design_sample/{{tile}}_{{year}}.log",
    params:
        target_se=DESIGN.get("target_se", 0.01),
        min_per_class=DESIGN.get("min_per_class", 50),
        users_accuracy=DESIGN.get("users_accuracy", 0.8),
        seed=DESIGN.get("seed", 0),
    conda:
        ENV
    shell:
        "lcflow -v design-sample --map {input.map:q} --out {output.gpkg:q} --csv {output.csv:q}"
        " --target-se {params.target_se} --min-per-class {params.min_per_class}"
        " --users-accuracy {params.users_accuracy} --seed {params.seed} > {log:q} 2>&1"


rule assess:
    input:
        unpack(truth_input),
        unpack(reference_input),
        model=f"{R}/models/{{model}}/model.json",
        samples=f"{R}/{{tile}}/{{year}}/samples.parquet",
        map=f"{R}/maps/{{tile}}_{{year}}_{{model}}.tif",
    output:
        json=f"{R}/assessment/{{tile}}_{{year}}_{{model}}.json",
        figure=report(
            f"{R}/assessment/{{tile}}_{{year}}_{{model}}.png",
            caption="../report/assessment.rst",
            category="Accuracy",
            subcategory="{model}",
            labels={"tile": "{tile}", "year": "{year}", "model": "{model}"},
        ),
        areas=report(
            f"{R}/assessment/{{tile}}_{{year}}_{{model}}.areas.png",
            caption="../report/class_areas.rst",
            category="Class areas",
            subcategory="{model}",
            labels={"tile": "{tile}", "year": "{year}", "model": "{model}"},
        ),
    log:
        f"{R}/logs/assess/{{tile}}_{{year}}_{{model}}.log",
    params:
        model_dir=subpath(input.model, parent=True),
        truth=lambda wc, input: f"--truth {shlex.quote(input.truth)}" if "truth" in input.keys() else "",
        reference=reference_option,
        nomenclature=nomenclature_args(),
    conda:
        ENV
    shell:
        "lcflow -v assess --model-dir {params.model_dir:q} --samples {input.samples:q} --map {input.map:q}"
        " {params.truth} {params.reference} {params.nomenclature} --out {output.json:q} --figure {output.figure:q}"
        " --areas-figure {output.areas:q} > {log:q} 2>&1"


rule summary:
    input:
        expand(f"{R}/assessment/{{tile}}_{{year}}_{{model}}.json", tile=TILES, year=YEARS, model=MODELS),
    output:
        report(f"{R}/accuracy.tsv", caption="../report/accuracy.rst", category="Accuracy"),
    log:
        f"{R}/logs/summary.log",
    conda:
        ENV
    shell:
        "lcflow -v summarize --assessments {input:q} --out {output:q} > {log:q} 2>&1"
