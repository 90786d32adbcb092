SAMPLE = config["sample"]


rule labels:
    input:
        unpack(label_inputs),
        grid=f"{R}/{{tile}}/{LABEL_YEAR}/cube.tif",
    output:
        f"{R}/{{tile}}/labels.tif",
    log:
        f"{R}/logs/labels/{{tile}}.log",
    benchmark:
        f"{R}/benchmarks/labels/{{tile}}.tsv"
    params:
        source=label_source_args,
        nomenclature=nomenclature_args(),
        resampling=LABELS.get("resampling", "auto"),
        unlabelled=f"--unlabelled-warn {LABELS.get('unlabelled_warn', 0.25)} --unlabelled-max {LABELS.get('unlabelled_max', 0.75)}",
    conda:
        ENV
    shell:
        "lcflow -v labels {params.source} --grid {input.grid:q} --resampling {params.resampling}"
        " {params.nomenclature} {params.unlabelled}"
        " --out {output:q} > {log:q} 2>&1"


rule sample:
    input:
        unpack(reference_cube),
        cube=f"{R}/{{tile}}/{{year}}/cube.tif",
        valid=f"{R}/{{tile}}/{{year}}/cube_valid.tif",
        labels=f"{R}/{{tile}}/labels.tif",
    output:
        f"{R}/{{tile}}/{{year}}/samples.parquet",
    log:
        f"{R}/logs/sample/{{tile}}_{{year}}.log",
    benchmark:
        f"{R}/benchmarks/sample/{{tile}}_{{year}}.tsv"
    params:
        per_class=SAMPLE["per_class"],
        min_valid=SAMPLE["min_valid_fraction"],
        boundary=SAMPLE["boundary_px"],
        block=SAMPLE["block_px"],
        fractions=json.dumps(SAMPLE["fractions"]),
        seed=SAMPLE["seed"],
        patch=SAMPLE["patch_px"],
        checks=label_check_args,
    conda:
        ENV
    shell:
        "lcflow -v sample --cube {input.cube:q} --valid {input.valid:q} --labels {input.labels:q}"
        " --tile {wildcards.tile} --year {wildcards.year} --per-class {params.per_class}"
        " --min-valid-fraction {params.min_valid} --boundary-px {params.boundary} --block-px {params.block}"
        " --fractions {params.fractions:q} --seed {params.seed} --patch-px {params.patch} {params.checks} --out {output:q} > {log:q} 2>&1"
