STAC = config["stac"]
CUBE = config["cube"]
STAGE = config["stage"]
NETWORK = (f"--signing {STAC['signing']} --http-timeout {STAC['http']['timeout_s']}"
           f" --http-retries {STAC['http']['retries']} --http-retry-delay {STAC['http']['retry_delay_s']}")


rule search:
    input:
        search_catalog,
    output:
        f"{R}/{{tile}}/{{year}}/items.json",
    log:
        f"{R}/logs/search/{{tile}}_{{year}}.log",
    benchmark:
        f"{R}/benchmarks/search/{{tile}}_{{year}}.tsv"
    params:
        source=search_source,
        collection=STAC["collection"],
        clouds=STAC["max_cloud_cover"],
    localrule: NETWORK_ON_HOST
    resources:
        **NETWORK_JOB,
    conda:
        ENV
    shell:
        "lcflow -v search --tile {wildcards.tile} --year {wildcards.year} {params.source}"
        " --collection {params.collection:q} --max-cloud-cover {params.clouds} --out {output:q} > {log:q} 2>&1"


rule stage:
    input:
        f"{R}/{{tile}}/{{year}}/items.json",
    output:
        staged_manifest(f"{R}/{{tile}}/{{year}}/staged.json"),
    log:
        f"{R}/logs/stage/{{tile}}_{{year}}.log",
    benchmark:
        f"{R}/benchmarks/stage/{{tile}}_{{year}}.tsv"
    localrule: NETWORK_ON_HOST
    resources:
        **NETWORK_JOB,
        stage_in=1,
    params:
        cube=json.dumps(CUBE, sort_keys=True),
        bounds=aoi_args,
        settings=json.dumps(STAGE, sort_keys=True),
        network=NETWORK,
    conda:
        ENV
    shell:
        "lcflow -v stage --items {input:q} --tile {wildcards.tile} --year {wildcards.year} --cube-settings {params.cube:q}"
        " {params.bounds} --settings {params.settings:q} {params.network}"
        " --out {output:q} > {log:q} 2>&1"


rule cube:
    input:
        cube_manifest,
    output:
        cube=f"{R}/{{tile}}/{{year}}/cube.tif",
        valid=f"{R}/{{tile}}/{{year}}/cube_valid.tif",
    log:
        f"{R}/logs/cube/{{tile}}_{{year}}.log",
    benchmark:
        f"{R}/benchmarks/cube/{{tile}}_{{year}}.tsv"
    params:
        settings=json.dumps(CUBE, sort_keys=True),
        bounds=aoi_args,
        network=NETWORK + (f" --s3-endpoint {shlex.quote(STAC['s3_endpoint'])}" if STAC["s3_endpoint"] else ""),
        unstage=unstage,
    conda:
        ENV
    shell:
        "lcflow -v cube --items {input:q} --tile {wildcards.tile} --year {wildcards.year} --settings {params.settings:q}"
        " {params.bounds} {params.network} --out {output.cube:q} --valid {output.valid:q} {params.unstage} > {log:q} 2>&1"
