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
        settings=json.dumps(SAMPLE, sort_keys=True),
        reference=lambda wildcards, input: (
            f"--reference-cube {shlex.quote(input.reference)}" if "reference" in input.keys() else ""
        ),
    conda:
        ENV
    shell:
        "lcflow -v sample --cube {input.cube:q} --valid {input.valid:q} --labels {input.labels:q}"
        " --tile {wildcards.tile} --year {wildcards.year} --settings {params.settings:q} {params.reference}"
        " --out {output:q} > {log:q} 2>&1"
