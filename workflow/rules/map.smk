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


rule assess:
    input:
        unpack(truth_input),
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
    log:
        f"{R}/logs/assess/{{tile}}_{{year}}_{{model}}.log",
    params:
        model_dir=subpath(input.model, parent=True),
        truth=lambda wc, input: f"--truth {shlex.quote(input.truth)}" if "truth" in input.keys() else "",
        nomenclature=nomenclature_args(),
    conda:
        ENV
    shell:
        "lcflow -v assess --model-dir {params.model_dir:q} --samples {input.samples:q} --map {input.map:q}"
        " {params.truth} {params.nomenclature} --out {output.json:q} --figure {output.figure:q} > {log:q} 2>&1"


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
