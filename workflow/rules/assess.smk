# The accuracy of the maps (lcflow.assess): a stratified reference sample drawn from a model's map to be
# labelled, each map assessed against it (and the test samples, and the demo's truth), the tables of all.


rule design_sample:
    input:
        map=f"{R}/maps/{{tile}}_{{year}}_{DESIGN_MODEL}.tif",
    output:
        gpkg=f"{R}/reference/{{tile}}_{{year}}_design.gpkg",
        csv=f"{R}/reference/{{tile}}_{{year}}_design.csv",
    log:
        f"{R}/logs/design_sample/{{tile}}_{{year}}.log",
    benchmark:
        f"{R}/benchmarks/design_sample/{{tile}}_{{year}}.tsv"
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
    benchmark:
        f"{R}/benchmarks/assess/{{tile}}_{{year}}_{{model}}.tsv"
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

# Every model side by side on one report page: accuracy with intervals, per-class F1, training time, speed.
rule compare_models:
    input:
        assessments=expand(f"{R}/assessment/{{tile}}_{{year}}_{{model}}.json", tile=TILES, year=YEARS, model=MODELS),
        models=expand(f"{R}/models/{{model}}/model.json", model=MODELS),
        timings=expand(f"{R}/maps/raw/{{tile}}_{{year}}_{{model}}_timing.json", tile=TILES, year=YEARS, model=MODELS),
    output:
        table=report(f"{R}/model_comparison.tsv", caption="../report/model_comparison.rst", category="Model comparison"),
        figure=report(f"{R}/model_comparison.png", caption="../report/model_comparison.rst", category="Model comparison"),
    log:
        f"{R}/logs/model_comparison.log",
    params:
        model_dirs=lambda wc, input: [str(Path(m).parent) for m in input.models],
    conda:
        ENV
    shell:
        "lcflow -v compare-models --assessments {input.assessments:q} --models {params.model_dirs:q}"
        " --timings {input.timings:q} --out {output.table:q} --figure {output.figure:q} > {log:q} 2>&1"
