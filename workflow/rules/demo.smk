if "demo" in config:
    DEMO = config["demo"]

    rule synth:
        output:
            catalog=f"{DEMO['out']}/catalog/catalog.json",
            corine=f"{DEMO['out']}/corine/clc_demo_3035.tif",
            truth=expand(f"{DEMO['out']}/truth/{{tile}}_{{year}}.tif", tile=TILES, year=YEARS),
        log:
            f"{R}/logs/synth.log",
        benchmark:
            f"{R}/benchmarks/synth.tsv"
        params:
            out=lambda wildcards, output: Path(output.catalog).parent.parent,
            aoi=json.dumps({t: config["aoi"][t] for t in TILES}),
            years=" ".join(map(str, YEARS)),
            acquisitions=" ".join(map(str, DEMO.get("acquisitions", [12, 20]))),
            mmu=DEMO.get("mmu_cells", 4),
            change=DEMO.get("change_fraction", 0.03),
            resolution=config["cube"]["resolution"],
        conda:
            ENV
        shell:
            "lcflow -v synth --out {params.out:q} --aoi {params.aoi:q} --years {params.years}"
            " --acquisitions {params.acquisitions} --mmu-cells {params.mmu} --change-fraction {params.change}"
            " --resolution {params.resolution} > {log:q} 2>&1"

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
