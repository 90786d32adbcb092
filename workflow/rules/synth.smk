if "demo" in config:
    DEMO = config["demo"]

    # the demo's data per tile-year, so that adding a year or a tile writes only its own scenes: each
    # tile-year's scenes in a STAC catalogue of their own (what its search reads), the CORINE raster of the
    # first year over every tile, and a catalogue of them all (stac.catalog)
    DEMO_OUT = DEMO["out"]
    SCENERY = (
        f"--first-year {YEARS[0]} --resolution {config['cube']['resolution']}"
        f" --acquisitions {' '.join(map(str, DEMO.get('acquisitions', [12, 20])))}"
        f" --change-fraction {DEMO.get('change_fraction', 0.03)}"
    )

    rule synth_scenes:
        output:
            catalog=f"{DEMO_OUT}/catalog/{{tile}}_{{year}}/catalog.json",
            truth=f"{DEMO_OUT}/truth/{{tile}}_{{year}}.tif",
        log:
            f"{R}/logs/synth/{{tile}}_{{year}}.log",
        benchmark:
            f"{R}/benchmarks/synth/{{tile}}_{{year}}.tsv"
        params:
            out=lambda wildcards, output: Path(output.catalog).parents[2],
            bounds=lambda wc: json.dumps(config["aoi"][wc.tile]),
            scenery=SCENERY,
        conda:
            ENV
        shell:
            "lcflow -v synth-scenes --out {params.out:q} --tile {wildcards.tile} --year {wildcards.year}"
            " --bounds {params.bounds:q} {params.scenery} > {log:q} 2>&1"

    rule synth_corine:
        output:
            f"{DEMO_OUT}/corine/clc_demo_3035.tif",
        log:
            f"{R}/logs/synth/corine.log",
        params:
            out=lambda wildcards, output: Path(output[0]).parents[1],
            aoi=json.dumps({t: config["aoi"][t] for t in TILES}),
            mmu=DEMO.get("mmu_cells", 4),
            scenery=SCENERY,
        conda:
            ENV
        shell:
            "lcflow -v synth-corine --out {params.out:q} --aoi {params.aoi:q} --mmu-cells {params.mmu} {params.scenery}"
            " > {log:q} 2>&1"

    # it only links the tile-years' catalogues: where Snakemake runs (a rule of the demo alone, so not in
    # the Snakefile's localrules, which would warn of it wherever the demo is off)
    rule synth_catalog:
        localrule: True
        input:
            expand(f"{DEMO_OUT}/catalog/{{tile}}_{{year}}/catalog.json", tile=TILES, year=YEARS),
        output:
            f"{DEMO_OUT}/catalog/catalog.json",
        log:
            f"{R}/logs/synth/catalog.log",
        params:
            out=lambda wildcards, output: Path(output[0]).parents[1],
        conda:
            ENV
        shell:
            "lcflow -v synth-catalog --out {params.out:q} --children {input:q} > {log:q} 2>&1"

    if DEMO_REFERENCE:

        rule label_reference:
            input:
                points=f"{R}/reference/{{tile}}_{{year}}_design.gpkg",
                truth=TRUTH.format(tile="{tile}", year="{year}"),
            output:
                f"{R}/reference/{{tile}}_{{year}}_labelled.gpkg",
            log:
                f"{R}/logs/label_reference/{{tile}}_{{year}}.log",
            params:
                nomenclature=nomenclature_args(),
            conda:
                ENV
            shell:
                "lcflow -v label-reference --points {input.points:q} --truth {input.truth:q} {params.nomenclature}"
                " --out {output:q} > {log:q} 2>&1"
