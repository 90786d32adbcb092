STAC = config["stac"]
CUBE = config["cube"]


rule search:
    input:
        [STAC["catalog"]] if STAC.get("catalog") else [],
    output:
        f"{R}/{{tile}}/{{year}}/items.json",
    log:
        f"{R}/logs/search/{{tile}}_{{year}}.log",
    params:
        source=f"--catalog {STAC['catalog']}" if STAC.get("catalog") else f"--api {STAC['api']}",
        collection=STAC.get("collection", "sentinel-2-l2a"),
        clouds=STAC.get("max_cloud_cover", 100),
    conda:
        ENV
    shell:
        "lcflow search --tile {wildcards.tile} --year {wildcards.year} {params.source}"
        " --collection {params.collection} --max-cloud-cover {params.clouds} --out {output} > {log} 2>&1"


rule cube:
    input:
        f"{R}/{{tile}}/{{year}}/items.json",
    output:
        cube=f"{R}/{{tile}}/{{year}}/cube.tif",
        valid=f"{R}/{{tile}}/{{year}}/cube_valid.tif",
    log:
        f"{R}/logs/cube/{{tile}}_{{year}}.log",
    params:
        bands=",".join(CUBE["bands"]),
        bounds=aoi_args,
        invalid=",".join(map(str, CUBE["invalid_scl"])),
        dilation=CUBE["dilation_px"],
        steps=CUBE["time_steps"],
        block=CUBE["block_px"],
        resolution=CUBE["resolution"],
    conda:
        ENV
    shell:
        "lcflow cube --items {input} --tile {wildcards.tile} --year {wildcards.year} --bands {params.bands}"
        " --resolution {params.resolution} {params.bounds} --invalid-scl {params.invalid}"
        " --dilation-px {params.dilation} --time-steps {params.steps} --block {params.block}"
        " --out {output.cube} --valid {output.valid} > {log} 2>&1"
